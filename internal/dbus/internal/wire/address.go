package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// endpoint is one alternative of a D-Bus address, ready for net.Dial; err is set
// instead for an alternative this package cannot connect to.
type endpoint struct {
	addr string // a socket path, or "@name" for an abstract socket
	err  error
}

// parseAddress splits a D-Bus address ("unix:path=/run/dbus/system_bus_socket", several
// separated by ';') into endpoints, in order. Malformed syntax fails the whole address;
// a transport other than unix, or a unix address that only a server can use (tmpdir=,
// dir=, runtime=), fails only its own alternative, so that a later one can still work.
func parseAddress(address string) ([]endpoint, error) {
	var out []endpoint
	for _, alt := range strings.Split(address, ";") {
		if alt == "" {
			continue
		}
		transport, params, ok := strings.Cut(alt, ":")
		if !ok {
			return nil, fmt.Errorf("address %q: %q has no transport prefix", address, alt)
		}
		kv, err := parseParams(params)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		out = append(out, unixEndpoint(transport, kv))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("address %q names no transport", address)
	}
	return out, nil
}

func unixEndpoint(transport string, kv map[string]string) endpoint {
	if transport != "unix" {
		return endpoint{err: fmt.Errorf("transport %q is not supported (only unix)", transport)}
	}
	path, hasPath := kv["path"]
	abstract, hasAbstract := kv["abstract"]
	switch {
	case hasPath && hasAbstract:
		return endpoint{err: errors.New("unix address with both path= and abstract=")}
	case hasPath:
		return endpoint{addr: path}
	case hasAbstract:
		return endpoint{addr: "@" + abstract}
	}
	return endpoint{err: errors.New("unix address without path= or abstract= (tmpdir=, dir= and runtime= are for servers)")}
}

// parseParams reads "key=value,key=value", unescaping %XX in values.
func parseParams(s string) (map[string]string, error) {
	kv := map[string]string{}
	if s == "" {
		return kv, nil
	}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", pair)
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		u, err := unescape(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		kv[k] = u
	}
	return kv, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// dial connects to the first endpoint of address that accepts, trying them in order.
func dial(ctx context.Context, address string) (net.Conn, error) {
	eps, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	var errs []error
	var d net.Dialer
	for _, ep := range eps {
		if ep.err != nil {
			errs = append(errs, ep.err)
			continue
		}
		c, err := d.DialContext(ctx, "unix", ep.addr)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to %s: %w", address, errors.Join(errs...))
}
