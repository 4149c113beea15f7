package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hiLE is a method call (serial 1, path "/", member "Hi", body s:"a") laid out by hand
// from the specification: fields start at 16, each struct on an 8-byte boundary, the
// variant's value aligned after its signature, the body on the next 8-byte boundary.
var hiLE = []byte{
	'l', 1, 0, 1, 6, 0, 0, 0, 1, 0, 0, 0, 39, 0, 0, 0,
	1, 1, 'o', 0, 1, 0, 0, 0, '/', 0, 0, 0, 0, 0, 0, 0, // PATH "/"
	3, 1, 's', 0, 2, 0, 0, 0, 'H', 'i', 0, 0, 0, 0, 0, 0, // MEMBER "Hi"
	8, 1, 'g', 0, 1, 's', 0, 0, // SIGNATURE "s", then header padding
	1, 0, 0, 0, 'a', 0,
}

// hiBE is the same message from a big-endian sender.
var hiBE = []byte{
	'B', 1, 0, 1, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 39,
	1, 1, 'o', 0, 0, 0, 0, 1, '/', 0, 0, 0, 0, 0, 0, 0,
	3, 1, 's', 0, 0, 0, 0, 2, 'H', 'i', 0, 0, 0, 0, 0, 0,
	8, 1, 'g', 0, 1, 's', 0, 0,
	0, 0, 0, 1, 'a', 0,
}

func TestMarshalFollowsTheSpecificationLayout(t *testing.T) {
	m := &Message{Type: TypeMethodCall, Serial: 1, Path: "/", Member: "Hi"}
	require.NoError(t, m.SetArgs("a"))
	b, err := m.Marshal()
	require.NoError(t, err)
	assert.Equal(t, hiLE, b)
}

func TestUnmarshalReadsBothByteOrders(t *testing.T) {
	for name, b := range map[string][]byte{"little": hiLE, "big": hiBE} {
		t.Run(name, func(t *testing.T) {
			m, err := Unmarshal(b)
			require.NoError(t, err)
			assert.Equal(t, TypeMethodCall, m.Type)
			assert.Equal(t, uint32(1), m.Serial)
			assert.Equal(t, ObjectPath("/"), m.Path)
			assert.Equal(t, "Hi", m.Member)
			assert.Equal(t, "s", m.Signature())
			args, err := m.Args()
			require.NoError(t, err)
			assert.Equal(t, []any{"a"}, args)
		})
	}
}

func TestBigEndianMessageIsRemarshalledLittleEndian(t *testing.T) {
	m, err := Unmarshal(hiBE)
	require.NoError(t, err)
	b, err := m.Marshal()
	require.NoError(t, err)
	assert.Equal(t, hiLE, b)
}

func TestMessageRoundTrip(t *testing.T) {
	args := []any{
		byte(7), true, false, int16(-2), uint16(65535), int32(math.MinInt32), uint32(math.MaxUint32),
		int64(math.MinInt64), uint64(math.MaxUint64), 2.5, "", "zone ünïcode",
		ObjectPath("/org/fedoraproject/FirewallD1"), Signature("a{sv}"), byte(1), uint64(3),
	}
	for _, typ := range []Type{TypeMethodCall, TypeMethodReturn, TypeError, TypeSignal} {
		t.Run(typ.String(), func(t *testing.T) {
			in := &Message{
				Type: typ, Flags: FlagNoReplyExpected, Serial: 42, Path: "/a/b_c/D1",
				Interface: "org.example.I", Member: "M", ErrorName: "org.example.Error",
				ReplySerial: 41, Destination: ":1.7", Sender: "org.example.S",
			}
			require.NoError(t, in.SetArgs(args...))
			assert.Equal(t, "ybbnqiuxtdssogyt", in.Signature())
			b, err := in.Marshal()
			require.NoError(t, err)

			out, err := ReadMessage(bytes.NewReader(b))
			require.NoError(t, err)
			got, err := out.Args()
			require.NoError(t, err)
			assert.Equal(t, args, got)
			out.body, out.order, in.body, in.order = nil, nil, nil, nil
			assert.Equal(t, in, out)
		})
	}
}

func TestMessageWithoutBodyHasNoSignatureField(t *testing.T) {
	m := &Message{Type: TypeMethodReturn, Serial: 2, ReplySerial: 1}
	b, err := m.Marshal()
	require.NoError(t, err)
	out, err := Unmarshal(b)
	require.NoError(t, err)
	args, err := out.Args()
	require.NoError(t, err)
	assert.Empty(t, args)
	assert.Len(t, b, 24, "fixed part, one REPLY_SERIAL field, no body")
}

func TestUnknownHeaderFieldIsSkipped(t *testing.T) {
	// Field 42 holding a variant of type a(ss) with one element, before the known
	// fields, must be stepped over whatever it holds.
	var e encoder
	e.buf = append(e.buf, 'l', byte(TypeMethodReturn), 0, 1)
	e.uint32(0) // body length
	e.uint32(5) // serial
	e.uint32(0) // field array length, set below
	e.buf = append(e.buf, 42)
	e.sig("a(ss)")
	e.uint32(0) // the inner array's length, set below
	lenAt := len(e.buf) - 4
	e.align(8)
	start := len(e.buf)
	e.str("k")
	e.str("v")
	binary.LittleEndian.PutUint32(e.buf[lenAt:], uint32(len(e.buf)-start))
	e.align(8)
	e.buf = append(e.buf, fieldReplySerial)
	e.sig("u")
	e.uint32(4)
	binary.LittleEndian.PutUint32(e.buf[12:], uint32(len(e.buf)-fixedHeaderSize))
	e.align(8)

	m, err := Unmarshal(e.buf)
	require.NoError(t, err)
	assert.Equal(t, uint32(4), m.ReplySerial)
	assert.Equal(t, uint32(5), m.Serial)
}

func TestUnmarshalRejectsMalformedMessages(t *testing.T) {
	patch := func(at int, v ...byte) []byte {
		b := bytes.Clone(hiLE)
		copy(b[at:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", hiLE[:30], "says"},
		{"too short for a header", hiLE[:10], "truncated"},
		{"bad endianness", patch(0, 'x'), "endianness"},
		{"protocol version 2", patch(3, 2), "version"},
		{"serial zero", patch(8, 0), "serial"},
		{"non-zero padding", patch(27, 1), "padding"},
		{"string without NUL", patch(42, 'x'), "NUL"},
		{"path field of type s", patch(18, 's'), "type"},
		{"body length too large", patch(4, 0xff, 0xff, 0xff, 0x7f), "exceeds"},
		{"call without member", func() []byte {
			m := &Message{Type: TypeMethodCall, Serial: 1, Path: "/"}
			b, _ := m.Marshal()
			return b
		}(), "member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unmarshal(tc.b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestArgsRejectsBadOrUnsupportedBodies(t *testing.T) {
	for _, tc := range []struct {
		name, sig string
		body      []byte
		want      string
	}{
		{"boolean 2", "b", []byte{2, 0, 0, 0}, "boolean"},
		{"array", "as", []byte{0, 0, 0, 0}, "not supported"},
		{"variant", "v", []byte{1, 's', 0, 0, 0, 0, 0, 0, 0, 0}, "not supported"},
		{"left over", "y", []byte{1, 2}, "left over"},
		{"bad object path", "o", []byte{2, 0, 0, 0, 'a', '/', 0}, "object path"},
		{"string past the end", "s", []byte{9, 0, 0, 0, 'a', 0}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Message{sig: tc.sig, body: tc.body, order: binary.LittleEndian}
			_, err := m.Args()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSetArgsRejectsWhatCannotBeSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		arg  any
	}{
		{"int", 1},
		{"slice", []string{"a"}},
		{"NUL in string", "a\x00b"},
		{"invalid UTF-8", "\xff"},
		{"bad path", ObjectPath("no/slash")},
		{"bad signature", Signature("a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			assert.Error(t, m.SetArgs("ok", tc.arg))
		})
	}
}

func TestValidSignature(t *testing.T) {
	for sig, ok := range map[string]bool{
		"": true, "s": true, "a{sv}": true, "(ii)as": true, "a(yv)": true, "aa(s(u))": true,
		"a": false, "(": false, "()": false, "(s": false, "s)": false, "z": false, "a{sv": false,
	} {
		err := validSignature(sig)
		assert.Equal(t, ok, err == nil, "signature %q: %v", sig, err)
	}
}
