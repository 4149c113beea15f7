package crinode

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// InNetNS runs fn on a thread that has entered the network namespace at path. A socket
// made there stays in that namespace after fn returns.
func InNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Without an UnlockOSThread the thread ends with the goroutine: one whose
		// namespace could not be restored is never reused.
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// PodNetNS is the path of a pod's network namespace, through its sandbox process.
func (n *Node) PodNetNS(st PodStatus) (string, error) {
	if st.Pid <= 0 {
		return "", ErrNoPid
	}
	return n.Path(fmt.Sprintf("/proc/%d/ns/net", st.Pid)), nil
}

// Serve accepts TCP connections on addr inside the network namespace at path and
// answers each with reply and a newline, until the listener is closed.
func Serve(path, addr, reply string) (net.Listener, error) {
	return ServeFunc(path, addr, func(net.Addr) string { return reply })
}

// ServeFunc is Serve answering each connection with reply of its peer's address: a
// server that says whom it sees, for tests of masquerading.
func ServeFunc(path, addr string, reply func(peer net.Addr) string) (net.Listener, error) {
	var l net.Listener
	err := InNetNS(path, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, reply(c.RemoteAddr()))
			c.Close()
		}
	}()
	return l, nil
}

// DialTCP connects to addr from the network namespace at path and returns the line the
// server answers.
func DialTCP(path, addr string, timeout time.Duration) (string, error) {
	var c net.Conn
	err := InNetNS(path, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, err
}

// Peer is a network namespace of its own joined to the node by a veth: another machine
// on the node's network, from which traffic reaches the node's host ports.
type Peer struct {
	cmd *exec.Cmd
	// NodeAddr is the node's address on the link, PeerAddr the peer's.
	NodeAddr, PeerAddr string
}

// NewPeer creates the peer (held by a pause process in a new network namespace) and
// the link: e2e-peer in the node with 10.99.0.1/24, eth0 in the peer with 10.99.0.2/24.
func (n *Node) NewPeer() (_ *Peer, err error) {
	p := &Peer{NodeAddr: "10.99.0.1", PeerAddr: "10.99.0.2"}
	p.cmd = exec.Command("unshare", "--net", n.o.Pause)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); exe(p.cmd.Process.Pid) != n.o.Pause; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("peer namespace did not come up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Made from the peer's side: a PID in ip's netns argument is the machine's there,
	// where n.Run would resolve it in the node's PID namespace.
	link := []string{"link", "add", "eth0", "type", "veth", "peer", "name", "e2e-peer", "netns", strconv.Itoa(n.init)}
	if out, err := exec.Command("nsenter", append([]string{"--target", pid, "--net", "--", "ip"}, link...)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("peer: ip %v: %w: %s", link, err, out)
	}
	steps := [][]string{
		{"ip", "addr", "add", p.NodeAddr + "/24", "dev", "e2e-peer"},
		{"ip", "link", "set", "e2e-peer", "up"},
	}
	for _, s := range steps {
		if _, err := n.Run(s[0], s[1:]...); err != nil {
			return nil, err
		}
	}
	for _, s := range [][]string{
		{"addr", "add", p.PeerAddr + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("nsenter", append([]string{"--target", pid, "--net", "--", "ip"}, s...)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("peer: ip %v: %w: %s", s, err, out)
		}
	}
	return p, nil
}

// NetNS is the path of the peer's network namespace.
func (p *Peer) NetNS() string { return fmt.Sprintf("/proc/%d/ns/net", p.cmd.Process.Pid) }

// Close removes the peer's namespace, and the link with it.
func (p *Peer) Close() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}
