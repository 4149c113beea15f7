package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// ObjectPath is a value of D-Bus type 'o'; a plain string is sent as 's'.
type ObjectPath string

// Signature is a value of D-Bus type 'g'.
type Signature string

// encoder appends little-endian D-Bus values to buf. Alignment is measured from the
// start of buf, which is why a body is encoded in a buffer of its own: it starts on an
// 8-byte boundary of the message, and every alignment divides 8.
type encoder struct {
	buf []byte
}

func (e *encoder) align(n int) {
	for len(e.buf)%n != 0 {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) uint32(v uint32) {
	e.align(4)
	e.buf = binary.LittleEndian.AppendUint32(e.buf, v)
}

// str writes 's' and 'o': uint32 length, bytes, NUL.
func (e *encoder) str(s string) {
	e.uint32(uint32(len(s)))
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
}

// sig writes 'g': one length byte, bytes, NUL.
func (e *encoder) sig(s string) {
	e.buf = append(e.buf, byte(len(s)))
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
}

// typeOf is the D-Bus type code a Go value is sent as.
func typeOf(v any) (byte, error) {
	switch v.(type) {
	case byte:
		return 'y', nil
	case bool:
		return 'b', nil
	case int16:
		return 'n', nil
	case uint16:
		return 'q', nil
	case int32:
		return 'i', nil
	case uint32:
		return 'u', nil
	case int64:
		return 'x', nil
	case uint64:
		return 't', nil
	case float64:
		return 'd', nil
	case string:
		return 's', nil
	case ObjectPath:
		return 'o', nil
	case Signature:
		return 'g', nil
	}
	return 0, fmt.Errorf("cannot send a %T: only basic D-Bus types are supported", v)
}

// value writes one basic value; typeOf has already accepted its Go type.
func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case byte:
		e.buf = append(e.buf, v)
	case bool:
		var b uint32
		if v {
			b = 1
		}
		e.uint32(b)
	case int16:
		e.align(2)
		e.buf = binary.LittleEndian.AppendUint16(e.buf, uint16(v))
	case uint16:
		e.align(2)
		e.buf = binary.LittleEndian.AppendUint16(e.buf, v)
	case int32:
		e.uint32(uint32(v))
	case uint32:
		e.uint32(v)
	case int64:
		e.align(8)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(v))
	case uint64:
		e.align(8)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, v)
	case float64:
		e.align(8)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(v))
	case string:
		if err := validString(v); err != nil {
			return err
		}
		e.str(v)
	case ObjectPath:
		if !validPath(string(v)) {
			return fmt.Errorf("%q is not an object path", v)
		}
		e.str(string(v))
	case Signature:
		if err := validSignature(string(v)); err != nil {
			return err
		}
		e.sig(string(v))
	}
	return nil
}

// encodeBody marshals args and returns their signature and bytes.
func encodeBody(args []any) (string, []byte, error) {
	var sig strings.Builder
	var e encoder
	for i, a := range args {
		c, err := typeOf(a)
		if err != nil {
			return "", nil, fmt.Errorf("argument %d: %w", i, err)
		}
		sig.WriteByte(c)
		if err := e.value(a); err != nil {
			return "", nil, fmt.Errorf("argument %d: %w", i, err)
		}
	}
	if sig.Len() > maxSignatureSize {
		return "", nil, fmt.Errorf("%d arguments exceed the signature limit", len(args))
	}
	return sig.String(), e.buf, nil
}

// validString rejects what the specification forbids in a string: invalid UTF-8 and NUL.
func validString(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("string %q is not valid UTF-8", s)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("string %q contains NUL", s)
	}
	return nil
}

// validPath checks object path syntax: "/" or "/"-separated non-empty [A-Za-z0-9_] elements.
func validPath(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, elem := range strings.Split(p[1:], "/") {
		if elem == "" {
			return false
		}
		for i := 0; i < len(elem); i++ {
			c := elem[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
				return false
			}
		}
	}
	return true
}
