package wire

import (
	"bufio"
	"encoding/gob"
	"errors"
	"reflect"
)

// MaxMessage bounds each value read off the socket (a call's header or arguments, an
// answer's header or reply). gob alone accepts messages up to 1 GiB and buffers each
// whole; a request is a config (whose files are capped at 2 MiB) plus a GC list, far
// below this.
const MaxMessage = 4 << 20

// ErrMessageTooLarge is what reading a value longer than MaxMessage gives; the stream
// is out of step after it, so the connection is dropped. Its text spells MaxMessage out
// (TestMessageTooLargeNamesTheLimit): errors.New of a constant is laid out by the
// linker, where fmt.Errorf would run in every exec of the binary, before main.
var ErrMessageTooLarge = errors.New("message larger than 4194304 bytes")

// decoder is a gob decoder that reads every value through a fresh budget of
// MaxMessage bytes.
type decoder struct {
	gob *gob.Decoder
	lim *limitedReader
}

func newDecoder(r *bufio.Reader) *decoder {
	lim := &limitedReader{r: r}
	return &decoder{gob: gob.NewDecoder(lim), lim: lim}
}

func (d *decoder) Decode(v any) error {
	d.lim.n = MaxMessage
	return d.gob.Decode(v)
}

func (d *decoder) DecodeValue(v reflect.Value) error {
	d.lim.n = MaxMessage
	return d.gob.DecodeValue(v)
}

// limitedReader reads at most n more bytes from r, then fails with ErrMessageTooLarge.
// It is an io.ByteReader, so gob reads it as is, without a read-ahead buffer that would
// spend the budget on the next value's bytes.
type limitedReader struct {
	r *bufio.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, ErrMessageTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

func (l *limitedReader) ReadByte() (byte, error) {
	if l.n <= 0 {
		return 0, ErrMessageTooLarge
	}
	b, err := l.r.ReadByte()
	if err == nil {
		l.n--
	}
	return b, err
}
