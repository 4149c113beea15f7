package crinode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Daemon is a long-running program of the node (flanneld, say), run in all of its
// namespaces, so that it dies with the node as a real node's daemons die with it.
type Daemon struct {
	cmd *exec.Cmd
	// done is closed once the daemon has exited and its log is closed.
	done chan struct{}
}

// Spawn starts name in the node's mount, PID and network namespaces, its output
// appended to logPath.
func (n *Node) Spawn(logPath, name string, args ...string) (*Daemon, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	argv := append([]string{"--target", strconv.Itoa(n.init), "--mount", "--pid", "--net", "--", name}, args...)
	d := &Daemon{cmd: exec.Command("nsenter", argv...), done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		d.cmd.Wait()
		log.Close()
		close(d.done)
	}()
	return d, nil
}

// Exited tells whether the daemon is gone.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, as systemd or the kubelet stops a daemon, and waits for it to
// exit (SIGKILL after 20 s).
func (d *Daemon) Stop() error {
	if d.Exited() {
		return nil
	}
	// nsenter forks to enter the PID namespace: the daemon is its one child.
	pid := onlyChild(d.cmd.Process.Pid)
	if pid == 0 {
		return errors.New("the daemon's process not found under nsenter")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		<-d.done
	}
	return nil
}
