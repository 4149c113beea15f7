package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

var errShort = errors.New("message truncated")

// decoder reads D-Bus values from buf in the sender's byte order. Alignment is measured
// from the start of buf, as for the encoder.
type decoder struct {
	buf   []byte
	pos   int
	order binary.ByteOrder
	depth int
}

func (d *decoder) align(n int) error {
	p := (d.pos + n - 1) / n * n
	if p > len(d.buf) {
		return errShort
	}
	for _, b := range d.buf[d.pos:p] {
		if b != 0 {
			return errors.New("non-zero alignment padding")
		}
	}
	d.pos = p
	return nil
}

// take returns the next n bytes after aligning to a.
func (d *decoder) take(a, n int) ([]byte, error) {
	if err := d.align(a); err != nil {
		return nil, err
	}
	if n < 0 || len(d.buf)-d.pos < n {
		return nil, errShort
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) uint32() (uint32, error) {
	b, err := d.take(4, 4)
	if err != nil {
		return 0, err
	}
	return d.order.Uint32(b), nil
}

// str reads 's' and 'o'.
func (d *decoder) str() (string, error) {
	n, err := d.uint32()
	if err != nil {
		return "", err
	}
	if n > maxMessageSize {
		return "", errShort
	}
	b, err := d.take(1, int(n)+1)
	if err != nil {
		return "", err
	}
	return terminated(b)
}

// sig reads 'g'.
func (d *decoder) sig() (string, error) {
	n, err := d.take(1, 1)
	if err != nil {
		return "", err
	}
	b, err := d.take(1, int(n[0])+1)
	if err != nil {
		return "", err
	}
	s, err := terminated(b)
	if err != nil {
		return "", err
	}
	return s, validSignature(s)
}

// terminated checks the NUL after a string's bytes and the string itself.
func terminated(b []byte) (string, error) {
	if b[len(b)-1] != 0 {
		return "", errors.New("string not NUL-terminated")
	}
	s := string(b[:len(b)-1])
	return s, validString(s)
}

// value decodes one value of the single complete type t. Containers and unix fds are
// refused: nothing this client talks to sends them in a reply it reads.
func (d *decoder) value(t string) (any, error) {
	var b []byte
	var err error
	switch t {
	case "y":
		b, err = d.take(1, 1)
		if err != nil {
			return nil, err
		}
		return b[0], nil
	case "b":
		v, err := d.uint32()
		if err != nil {
			return nil, err
		}
		if v > 1 {
			return nil, fmt.Errorf("boolean value %d", v)
		}
		return v == 1, nil
	case "n", "q":
		if b, err = d.take(2, 2); err != nil {
			return nil, err
		}
		if t == "n" {
			return int16(d.order.Uint16(b)), nil
		}
		return d.order.Uint16(b), nil
	case "i":
		v, err := d.uint32()
		return int32(v), err
	case "u":
		return d.uint32()
	case "x", "t", "d":
		if b, err = d.take(8, 8); err != nil {
			return nil, err
		}
		v := d.order.Uint64(b)
		switch t {
		case "x":
			return int64(v), nil
		case "d":
			return math.Float64frombits(v), nil
		}
		return v, nil
	case "s":
		return d.str()
	case "o":
		s, err := d.str()
		if err == nil && !validPath(s) {
			err = fmt.Errorf("%q is not an object path", s)
		}
		return ObjectPath(s), err
	case "g":
		s, err := d.sig()
		return Signature(s), err
	}
	return nil, fmt.Errorf("type %q is not supported (basic types only)", t)
}

// skip steps over one value of any complete type t, so that header fields this package
// does not know can be ignored as the specification requires.
func (d *decoder) skip(t string) error {
	if isBasic(t[0]) {
		_, err := d.value(t)
		return err
	}
	if d.depth++; d.depth > maxNesting {
		return errors.New("values nested too deeply")
	}
	defer func() { d.depth-- }()
	switch t[0] {
	case 'h':
		_, err := d.uint32()
		return err
	case 'v':
		s, err := d.sig()
		if err != nil {
			return err
		}
		inner, rest, err := nextType(s)
		if err != nil || rest != "" {
			return fmt.Errorf("variant signature %q is not one complete type", s)
		}
		return d.skip(inner)
	case 'a':
		n, err := d.uint32()
		if err != nil {
			return err
		}
		if n > maxArraySize {
			return fmt.Errorf("array of %d bytes exceeds %d", n, maxArraySize)
		}
		_, err = d.take(alignment(t[1]), int(n))
		return err
	default: // '(' or '{'
		if err := d.align(8); err != nil {
			return err
		}
		for rest := t[1 : len(t)-1]; rest != ""; {
			var field string
			var err error
			if field, rest, err = nextType(rest); err != nil {
				return err
			}
			if err := d.skip(field); err != nil {
				return err
			}
		}
		return nil
	}
}

// decodeBody decodes a body of signature sig.
func decodeBody(order binary.ByteOrder, sig string, body []byte) ([]any, error) {
	d := decoder{buf: body, order: order}
	var out []any
	for rest := sig; rest != ""; {
		var t string
		var err error
		if t, rest, err = nextType(rest); err != nil {
			return nil, err
		}
		v, err := d.value(t)
		if err != nil {
			return nil, fmt.Errorf("body %q, value %d: %w", sig, len(out), err)
		}
		out = append(out, v)
	}
	if d.pos != len(body) {
		return nil, fmt.Errorf("body %q: %d bytes left over", sig, len(body)-d.pos)
	}
	return out, nil
}
