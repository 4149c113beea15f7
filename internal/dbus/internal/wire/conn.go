package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is an authenticated connection to a bus. Writes may come from several goroutines;
// reads are serialised, and RoundTrip holds the read side for the whole exchange, so
// that one caller never swallows another's reply.
type Conn struct {
	nc     net.Conn
	r      *bufio.Reader
	serial atomic.Uint32

	rmu, wmu sync.Mutex

	mu     sync.Mutex
	broken error // set once an exchange failed midway: the stream can no longer be trusted
}

// Dial connects to the first reachable alternative of a D-Bus address and
// authenticates. ctx bounds both; a bus that accepts and then says nothing fails when
// ctx ends instead of hanging.
func Dial(ctx context.Context, address string) (*Conn, error) {
	nc, err := dial(ctx, address)
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, r: bufio.NewReader(nc)}
	if err := guard(ctx, nc.SetDeadline, func() error { return authenticate(nc, c.r) }); err != nil {
		nc.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", address, err)
	}
	return c, nil
}

// Close closes the socket; a Read or RoundTrip blocked on it returns.
func (c *Conn) Close() error { return c.nc.Close() }

// guard runs one I/O step under ctx: the socket deadline follows ctx's deadline, and
// cancelling ctx moves it into the past, which unblocks the step at once.
func guard(ctx context.Context, setDeadline func(time.Time) error, step func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline() // the zero time clears an earlier call's deadline
	if err := setDeadline(deadline); err != nil {
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = setDeadline(time.Unix(1, 0))
		close(fired)
	})
	err := step()
	if !stop() {
		<-fired // so that this ctx cannot move the next step's deadline
	}
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket's timer can run out a moment before ctx's own.
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

func (c *Conn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
	}
	return err
}

func (c *Conn) usable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return fmt.Errorf("connection unusable after an earlier failure: %w", c.broken)
	}
	return nil
}

// Write sends m, giving it the next serial if it has none.
func (c *Conn) Write(ctx context.Context, m *Message) error {
	if err := c.usable(); err != nil {
		return err
	}
	for m.Serial == 0 {
		m.Serial = c.serial.Add(1) // skips zero when the counter wraps
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err = guard(ctx, c.nc.SetWriteDeadline, func() error {
		_, err := c.nc.Write(b)
		return err
	})
	if err != nil {
		return c.fail(fmt.Errorf("send %s: %w", m.Type, err))
	}
	return nil
}

// Read receives the next message, whatever it is.
func (c *Conn) Read(ctx context.Context) (*Message, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.read(ctx)
}

func (c *Conn) read(ctx context.Context) (*Message, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	var m *Message
	err := guard(ctx, c.nc.SetReadDeadline, func() error {
		var err error
		m, err = ReadMessage(c.r)
		return err
	})
	if err != nil {
		return nil, c.fail(fmt.Errorf("receive: %w", err))
	}
	return m, nil
}

// RoundTrip sends a method call and returns its reply, a method return or an error
// message. Every other message read meanwhile (signals such as NameAcquired, calls to
// us) is dropped: a connection waiting for a reply serves nothing.
func (c *Conn) RoundTrip(ctx context.Context, call *Message) (*Message, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.Write(ctx, call); err != nil {
		return nil, err
	}
	for {
		m, err := c.read(ctx)
		if err != nil {
			return nil, err
		}
		if m.ReplySerial == call.Serial && (m.Type == TypeMethodReturn || m.Type == TypeError) {
			return m, nil
		}
	}
}
