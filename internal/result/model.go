package result

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
		Interfaces: cloneSlice(r.Interfaces),
		DNS: DNS{
			Nameservers: cloneSlice(r.DNS.Nameservers),
			Domain:      r.DNS.Domain,
			Search:      cloneSlice(r.DNS.Search),
			Options:     cloneSlice(r.DNS.Options),
		},
	}
	if r.IPs != nil {
		c.IPs = make([]IPConfig, len(r.IPs))
		for i, ip := range r.IPs {
			ip.Interface = cloneInt(ip.Interface)
			c.IPs[i] = ip
		}
	}
	if r.Routes != nil {
		c.Routes = make([]Route, len(r.Routes))
		for i, rt := range r.Routes {
			rt.Table, rt.Scope = cloneInt(rt.Table), cloneInt(rt.Scope)
			c.Routes[i] = rt
		}
	}
	return c
}

// cloneSlice copies s, keeping nil as nil.
func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
