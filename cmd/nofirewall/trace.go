package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// execEvent is one exec seen by the trace: the file run, the pid that ran it and that
// process's command line as /proc showed it then (its old image's or its new one's).
type execEvent struct {
	pid  int32
	path string
	argv string
}

func (e execEvent) String() string { return fmt.Sprintf("pid %d ran %s (%s)", e.pid, e.path, e.argv) }

// trace collects the execs of files on every mount of this namespace. fanotify reports
// an exec when the kernel opens the file to run it, with a descriptor of the file, so
// the path is exact however short-lived the process.
type trace struct {
	fd              int
	stopc, finished chan struct{}
	// execs and err are the reader's until finished is closed.
	execs []execEvent
	err   error
}

// startTrace marks every mount of the namespace for FAN_OPEN_EXEC. A mount created
// later (none is, in the tests) would not be traced.
func startTrace() (*trace, error) {
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fanotify: %w", err)
	}
	points, err := mountPoints()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	marked := 0
	for _, p := range points {
		// Pseudo file systems (proc, sysfs, cgroup) refuse mount marks; they hold no
		// programs.
		if unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_OPEN_EXEC, unix.AT_FDCWD, p) == nil {
			marked++
		}
	}
	if marked == 0 {
		unix.Close(fd)
		return nil, errors.New("fanotify: no mount could be marked")
	}
	t := &trace{fd: fd, stopc: make(chan struct{}), finished: make(chan struct{})}
	go t.read()
	return t, nil
}

// mountPoints are the mount points of this namespace, from /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, unescapeMountPath(f[4]))
		}
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a blank).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// read collects events until stop is asked for and the queue is empty: an exec's event
// is queued before the exec returns, so none of the command's is missed.
func (t *trace) read() {
	defer close(t.finished)
	buf := make([]byte, 64*1024)
	stopping := false
	for {
		n, err := unix.Read(t.fd, buf)
		switch {
		case err == unix.EAGAIN && stopping:
			return
		case err == unix.EAGAIN:
			select {
			case <-t.stopc:
				stopping = true // one more read: what was queued meanwhile
			case <-time.After(5 * time.Millisecond):
			}
			continue
		case err == unix.EINTR:
			continue
		case err != nil:
			t.err = fmt.Errorf("fanotify read: %w", err)
			return
		}
		if err := t.parse(buf[:n]); err != nil {
			t.err = err
			return
		}
	}
}

func (t *trace) parse(b []byte) error {
	const size = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
	for len(b) >= size {
		m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
		if int(m.Event_len) < size || int(m.Event_len) > len(b) {
			return fmt.Errorf("fanotify: malformed event")
		}
		if m.Mask&unix.FAN_Q_OVERFLOW != 0 {
			return fmt.Errorf("fanotify: the event queue overflowed, execs were missed")
		}
		if m.Fd >= 0 {
			path, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", m.Fd))
			unix.Close(int(m.Fd))
			t.execs = append(t.execs, execEvent{pid: m.Pid, path: path, argv: cmdline(m.Pid)})
		}
		b = b[m.Event_len:]
	}
	return nil
}

// cmdline is a process's command line, "" once it is gone.
func cmdline(pid int32) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// stop ends the trace and returns every exec it saw.
func (t *trace) stop() ([]execEvent, error) {
	close(t.stopc)
	<-t.finished
	unix.Close(t.fd)
	return t.execs, t.err
}

func writeTrace(path string, execs []execEvent) error {
	var b strings.Builder
	for _, e := range execs {
		fmt.Fprintf(&b, "%d\t%s\t%s\n", e.pid, e.path, e.argv)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
