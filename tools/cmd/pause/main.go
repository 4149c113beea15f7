// Command pause is the sandbox image's one program, as Kubernetes' pause: it holds the
// pod's namespaces, reaps the orphans it inherits as a PID namespace's init, and exits
// 0 on SIGTERM or SIGINT. The e2e suite also runs it as the init of the PID namespace
// its containerd lives in. Built static, it is the whole image (see package crinode).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, so that none stays a zombie.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
