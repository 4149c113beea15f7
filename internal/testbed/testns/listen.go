package testns

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// ServeTCP listens on addr (":8000", ":0") inside n and answers every connection with
// reply and a newline (nothing when reply is empty) before closing it, until the test
// ends. The socket keeps its namespace, so it is served from an ordinary goroutine; one
// bound to the wildcard address also answers on interfaces added later. It returns the
// port listened on.
func ServeTCP(t testing.TB, n *NS, network, addr, reply string) int {
	t.Helper()
	return ServeTCPWith(t, n, network, addr, func(net.Addr) string { return reply })
}

// ServeTCPWith is ServeTCP answering each connection with what reply makes of the
// address it came from.
func ServeTCPWith(t testing.TB, n *NS, network, addr string, reply func(remote net.Addr) string) int {
	t.Helper()
	var ln net.Listener
	n.Run(t, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if r := reply(c.RemoteAddr()); r != "" {
				fmt.Fprintf(c, "%s\n", r)
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// DialTCP connects from inside n to addr within timeout and returns the first line the
// server sends, without the newline ("" and the error when that fails).
func DialTCP(n *NS, addr string, timeout time.Duration) (string, error) {
	var got string
	err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		got = strings.TrimSpace(line)
		return err
	})
	return got, err
}
