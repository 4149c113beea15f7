// Package wire is the D-Bus wire protocol as far as internal/dbus needs it: addresses,
// the SASL EXTERNAL handshake, and messages with bodies of basic types. It is shared by
// the client (internal/dbus) and the test server (internal/dbus/dbustest), so that the
// product package holds no serving code.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Type is a message's kind, the header's second byte.
type Type byte

// The four message types.
const (
	TypeMethodCall   Type = 1
	TypeMethodReturn Type = 2
	TypeError        Type = 3
	TypeSignal       Type = 4
)

func (t Type) String() string {
	switch t {
	case TypeMethodCall:
		return "method call"
	case TypeMethodReturn:
		return "method return"
	case TypeError:
		return "error"
	case TypeSignal:
		return "signal"
	}
	return fmt.Sprintf("message type %d", byte(t))
}

// FlagNoReplyExpected marks a method call whose caller will not read a reply.
const FlagNoReplyExpected byte = 0x1

// Header field codes and the type each one's variant must hold.
const (
	fieldPath        = 1
	fieldInterface   = 2
	fieldMember      = 3
	fieldErrorName   = 4
	fieldReplySerial = 5
	fieldDestination = 6
	fieldSender      = 7
	fieldSignature   = 8
	fieldUnixFDs     = 9
)

var fieldTypes = [...]string{
	fieldPath: "o", fieldInterface: "s", fieldMember: "s", fieldErrorName: "s",
	fieldReplySerial: "u", fieldDestination: "s", fieldSender: "s", fieldSignature: "g",
	fieldUnixFDs: "u",
}

// fixedHeaderSize is the part before the header fields: endianness, type, flags,
// version, body length, serial, and the length of the header field array.
const fixedHeaderSize = 16

// Message is one D-Bus message. Its body is kept encoded until Args is called, so that
// a message nobody reads (a signal skipped while waiting for a reply) costs no decoding
// and cannot fail on types this package does not decode.
type Message struct {
	Type   Type
	Flags  byte
	Serial uint32

	Path        ObjectPath
	Interface   string
	Member      string
	ErrorName   string
	ReplySerial uint32
	Destination string
	Sender      string

	sig   string
	body  []byte
	order binary.ByteOrder
}

// SetArgs encodes args as the body (basic Go types: string, bool, byte, int16, uint16,
// int32, uint32, int64, uint64, float64, ObjectPath, Signature).
func (m *Message) SetArgs(args ...any) error {
	sig, body, err := encodeBody(args)
	if err != nil {
		return err
	}
	m.sig, m.body, m.order = sig, body, binary.LittleEndian
	return nil
}

// Signature is the body's signature.
func (m *Message) Signature() string { return m.sig }

// Args decodes the body.
func (m *Message) Args() ([]any, error) {
	if m.sig == "" {
		return nil, nil
	}
	return decodeBody(m.order, m.sig, m.body)
}

// Marshal encodes the message little-endian.
func (m *Message) Marshal() ([]byte, error) {
	if m.Serial == 0 {
		return nil, errors.New("message serial must not be zero")
	}
	if m.order != nil && m.order != binary.LittleEndian {
		args, err := m.Args()
		if err != nil {
			return nil, err
		}
		if err := m.SetArgs(args...); err != nil {
			return nil, err
		}
	}
	e := encoder{buf: make([]byte, 0, 128+len(m.body))}
	e.buf = append(e.buf, 'l', byte(m.Type), m.Flags, 1)
	e.uint32(uint32(len(m.body)))
	e.uint32(m.Serial)
	e.uint32(0) // the field array's length, filled in below
	for _, f := range []struct {
		code byte
		v    any
		set  bool
	}{
		{fieldPath, m.Path, m.Path != ""},
		{fieldInterface, m.Interface, m.Interface != ""},
		{fieldMember, m.Member, m.Member != ""},
		{fieldErrorName, m.ErrorName, m.ErrorName != ""},
		{fieldReplySerial, m.ReplySerial, m.ReplySerial != 0},
		{fieldDestination, m.Destination, m.Destination != ""},
		{fieldSender, m.Sender, m.Sender != ""},
		{fieldSignature, Signature(m.sig), m.sig != ""},
	} {
		if !f.set {
			continue
		}
		e.align(8)
		e.buf = append(e.buf, f.code)
		e.sig(fieldTypes[f.code])
		if err := e.value(f.v); err != nil {
			return nil, fmt.Errorf("header field %d: %w", f.code, err)
		}
	}
	binary.LittleEndian.PutUint32(e.buf[12:], uint32(len(e.buf)-fixedHeaderSize))
	e.align(8)
	e.buf = append(e.buf, m.body...)
	if len(e.buf) > maxMessageSize {
		return nil, fmt.Errorf("message of %d bytes exceeds %d", len(e.buf), maxMessageSize)
	}
	return e.buf, nil
}

// frame reads the fixed header and returns the byte order and the whole message's size.
func frame(fixed []byte) (binary.ByteOrder, int, error) {
	var order binary.ByteOrder
	switch fixed[0] {
	case 'l':
		order = binary.LittleEndian
	case 'B':
		order = binary.BigEndian
	default:
		return nil, 0, fmt.Errorf("unknown endianness byte %q", fixed[0])
	}
	if fixed[3] != 1 {
		return nil, 0, fmt.Errorf("protocol version %d, want 1", fixed[3])
	}
	body, fields := uint64(order.Uint32(fixed[4:])), uint64(order.Uint32(fixed[12:]))
	if fields > maxArraySize {
		return nil, 0, fmt.Errorf("header fields of %d bytes exceed %d", fields, maxArraySize)
	}
	size := (fixedHeaderSize+fields+7)/8*8 + body
	if size > maxMessageSize {
		return nil, 0, fmt.Errorf("message of %d bytes exceeds %d", size, maxMessageSize)
	}
	return order, int(size), nil
}

// ReadMessage reads one message from r.
func ReadMessage(r io.Reader) (*Message, error) {
	fixed := make([]byte, fixedHeaderSize)
	if _, err := io.ReadFull(r, fixed); err != nil {
		return nil, err
	}
	_, size, err := frame(fixed)
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	copy(b, fixed)
	if _, err := io.ReadFull(r, b[fixedHeaderSize:]); err != nil {
		return nil, fmt.Errorf("reading message: %w", unexpectedEOF(err))
	}
	return Unmarshal(b)
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Unmarshal decodes one whole message, in either byte order.
func Unmarshal(b []byte) (*Message, error) {
	if len(b) < fixedHeaderSize {
		return nil, errShort
	}
	order, size, err := frame(b)
	if err != nil {
		return nil, err
	}
	if size != len(b) {
		return nil, fmt.Errorf("message is %d bytes, its header says %d", len(b), size)
	}
	m := &Message{Type: Type(b[1]), Flags: b[2], Serial: order.Uint32(b[8:]), order: order}
	if m.Serial == 0 {
		return nil, errors.New("message serial is zero")
	}
	fieldsEnd := fixedHeaderSize + int(order.Uint32(b[12:]))
	d := decoder{buf: b[:fieldsEnd], pos: fixedHeaderSize, order: order}
	for d.pos < fieldsEnd {
		if err := m.readField(&d); err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
	}
	d.buf = b
	if err := d.align(8); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	m.body = b[d.pos:]
	if m.sig == "" && len(m.body) > 0 {
		return nil, fmt.Errorf("body of %d bytes without a signature", len(m.body))
	}
	return m, m.checkFields()
}

// readField decodes one (code, variant) struct of the header field array.
func (m *Message) readField(d *decoder) error {
	code, err := d.take(8, 1)
	if err != nil {
		return err
	}
	sig, err := d.sig()
	if err != nil {
		return err
	}
	c := int(code[0])
	if c == 0 || c >= len(fieldTypes) {
		// Unknown fields are to be ignored, whatever they hold.
		if _, rest, err := nextType(sig); err != nil || rest != "" {
			return fmt.Errorf("field %d: variant signature %q is not one complete type", c, sig)
		}
		return d.skip(sig)
	}
	if sig != fieldTypes[c] {
		return fmt.Errorf("field %d has type %q, want %q", c, sig, fieldTypes[c])
	}
	v, err := d.value(sig)
	if err != nil {
		return fmt.Errorf("field %d: %w", c, err)
	}
	switch c {
	case fieldPath:
		m.Path = v.(ObjectPath)
	case fieldInterface:
		m.Interface = v.(string)
	case fieldMember:
		m.Member = v.(string)
	case fieldErrorName:
		m.ErrorName = v.(string)
	case fieldReplySerial:
		m.ReplySerial = v.(uint32)
	case fieldDestination:
		m.Destination = v.(string)
	case fieldSender:
		m.Sender = v.(string)
	case fieldSignature:
		m.sig = string(v.(Signature))
	case fieldUnixFDs:
		if v.(uint32) != 0 {
			return errors.New("message carries unix fds, which this client never asks for")
		}
	}
	return nil
}

// checkFields enforces the header fields each message type requires.
func (m *Message) checkFields() error {
	var missing string
	switch m.Type {
	case TypeMethodCall:
		if m.Path == "" || m.Member == "" {
			missing = "path and member"
		}
	case TypeMethodReturn:
		if m.ReplySerial == 0 {
			missing = "reply serial"
		}
	case TypeError:
		if m.ErrorName == "" || m.ReplySerial == 0 {
			missing = "error name and reply serial"
		}
	case TypeSignal:
		if m.Path == "" || m.Interface == "" || m.Member == "" {
			missing = "path, interface and member"
		}
	}
	if missing != "" {
		return fmt.Errorf("%s without %s", m.Type, missing)
	}
	return nil
}
