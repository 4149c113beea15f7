package daemon

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/obs/invlog"
)

// Main runs `dhcp daemon [flags]` with the reference's flags (and -statedir) until
// SIGTERM or SIGINT, and returns the exit status.
func Main(args, env []string, stdout, stderr io.Writer) int {
	opts, socketPath, pidFile, err := parseFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	logger := log.New(stderr, "dhcp daemon: ", log.LstdFlags)
	if err := run(opts, socketPath, pidFile, env, logger); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}

func parseFlags(args, env []string, stderr io.Writer) (opts Options, socketPath, pidFile string, err error) {
	opts = Defaults()
	var logFile, logLevel string
	fs := flag.NewFlagSet("dhcp daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&pidFile, "pidfile", "", "optional path to write daemon PID to")
	fs.StringVar(&opts.HostPrefix, "hostprefix", "", "optional prefix to host root (put before every netns path)")
	fs.StringVar(&socketPath, "socketpath", "", "optional dhcp daemon socket path (default "+dhcpconf.DefaultSocketPath+")")
	fs.StringVar(&opts.StateDir, "statedir", opts.StateDir, "directory of the lease files that outlive a restart")
	fs.BoolVar(&opts.Broadcast, "broadcast", false, "ask DHCP servers to broadcast their answers")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "dhcp client timeout for one exchange")
	fs.DurationVar(&opts.ResendMax, "resendmax", opts.ResendMax, "dhcp client max resend delay between attempts")
	fs.DurationVar(&opts.ResendTimeout, "resendtimeout", opts.ResendTimeout, "how long to try to get a lease for an ADD")
	fs.StringVar(&logFile, "logfile", lookup(env, invlog.EnvFile), "invocation log: a line per call and lease event, as the plugins write (env "+invlog.EnvFile+")")
	fs.StringVar(&logLevel, "loglevel", lookup(env, invlog.EnvLevel), "invocation log level, info or debug (env "+invlog.EnvLevel+")")
	if err = fs.Parse(args); err != nil {
		return
	}
	opts.Log, err = invlog.FromEnv(logFile, logLevel)
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case opts.Timeout <= 0 || opts.ResendTimeout <= 0:
		err = errors.New("-timeout and -resendtimeout must be positive")
	}
	if err != nil {
		fmt.Fprintf(stderr, "dhcp daemon: %v\n", err)
		return opts, "", "", errors.New("usage")
	}
	if !opts.Log.On() {
		opts.Log = nil
	}
	return opts, cmp.Or(socketPath, dhcpconf.DefaultSocketPath), pidFile, nil
}

func run(opts Options, socketPath, pidFile string, env []string, logger *log.Logger) error {
	d, err := New(opts, logger)
	if err != nil {
		return err
	}
	l, owned, err := listener(socketPath, env)
	if err != nil {
		return err
	}
	if owned {
		defer os.Remove(socketPath)
	}
	if pidFile != "" {
		if err := writePidFile(pidFile); err != nil {
			l.Close()
			return err
		}
		defer os.Remove(pidFile)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go d.cancelOnSignal(sigs, func(s os.Signal) {
		logger.Printf("%v: stopping; leases stay in %s for the next start", s, opts.StateDir)
	})
	d.Resume()
	logger.Printf("serving on %s, leases in %s", l.Addr(), opts.StateDir)
	err = d.Serve(l)
	d.Stop() // also ends cancelOnSignal when Serve failed without a signal
	return err
}

// cancelOnSignal ends the daemon's context at the first signal, or returns when the
// context ends otherwise. It only cancels: waiting for the upkeep goroutines is Stop's,
// after Serve has drained the calls, since a call finishing an Allocate starts one
// (WaitGroup.Add) and must not race a Wait.
func (d *Daemon) cancelOnSignal(sigs <-chan os.Signal, logSignal func(os.Signal)) {
	select {
	case s := <-sigs:
		logSignal(s)
		d.cancel()
	case <-d.ctx.Done():
	}
}

// listener takes the socket systemd passed (LISTEN_PID/LISTEN_FDS, fd 3) or makes one
// at path. owned says the daemon created the socket file and removes it on exit.
func listener(path string, env []string) (l net.Listener, owned bool, err error) {
	if l, err := activated(env); l != nil || err != nil {
		return l, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("socket dir: %w", err)
	}
	if err := clearStaleSocket(path); err != nil {
		return nil, false, err
	}
	l, err = listenPrivate(path)
	return l, err == nil, err
}

// socketMode is the daemon socket's: only its own user (root) may connect, whatever the
// umask, since a call can take or release any container's lease.
const socketMode = 0o600

// listenPrivate makes the socket file at path with socketMode from the start: the
// socket's mode is set before bind, which creates the file with it (less the umask), so
// no moment exists where others could connect; a umask that took more away is undone.
func listenPrivate(path string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.Fchmod(int(fd), socketMode) }); cerr != nil {
			return cerr
		}
		return err
	}}
	l, err := lc.Listen(context.Background(), "unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, socketMode); err != nil {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return l, nil
}

// clearStaleSocket removes a socket left by a daemon that died, but never a live
// daemon's socket nor a file that is not a socket.
func clearStaleSocket(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s exists and is not a socket; not replacing it", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another daemon is listening on %s", path)
	}
	return os.Remove(path)
}

// activated returns the socket of systemd socket activation, if this process got one.
func activated(env []string) (net.Listener, error) {
	pid, fds := lookup(env, "LISTEN_PID"), lookup(env, "LISTEN_FDS")
	if pid == "" || fds == "" || pid != strconv.Itoa(os.Getpid()) {
		return nil, nil
	}
	n, err := strconv.Atoi(fds)
	if err != nil || n < 1 {
		return nil, nil
	}
	if n > 1 {
		return nil, fmt.Errorf("socket activation passed %d sockets; expected one", n)
	}
	const listenFdsStart = 3
	syscall.CloseOnExec(listenFdsStart)
	f := os.NewFile(listenFdsStart, "systemd-socket")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	return l, nil
}

func lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func writePidFile(path string) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pidfile: %w", err)
	}
	return nil
}
