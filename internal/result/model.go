package result

import "slices"

// AddInterface appends i to r.Interfaces and returns its index, the value an IPConfig's
// Interface points at.
func (r *Result) AddInterface(i Interface) int {
	r.Interfaces = append(r.Interfaces, i)
	return len(r.Interfaces) - 1
}

// Clone returns a deep copy of r: no slice or pointer is shared with it.
func (r *Result) Clone() *Result {
	if r == nil {
		return nil
	}
	c := &Result{
		CNIVersion: r.CNIVersion,
		Interfaces: slices.Clone(r.Interfaces),
		DNS: DNS{
			Nameservers: slices.Clone(r.DNS.Nameservers),
			Domain:      r.DNS.Domain,
			Search:      slices.Clone(r.DNS.Search),
			Options:     slices.Clone(r.DNS.Options),
		},
	}
	c.IPs = slices.Clone(r.IPs)
	for i := range c.IPs {
		c.IPs[i].Interface = cloneInt(c.IPs[i].Interface)
	}
	c.Routes = slices.Clone(r.Routes)
	for i := range c.Routes {
		c.Routes[i].Table, c.Routes[i].Scope = cloneInt(c.Routes[i].Table), cloneInt(c.Routes[i].Scope)
	}
	return c
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	return new(*p)
}
