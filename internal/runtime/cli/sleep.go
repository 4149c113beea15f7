package cli

// runSleep blocks until SIGTERM or SIGINT and then exits 0: the main container of the
// install DaemonSet, which has nothing left to do once its init container installed
// the plugins, and must not cost a shell, a pause image or a restart loop. As PID 1 it
// would otherwise ignore SIGTERM and wait out the grace period.
func runSleep(p Process, args []string) int {
	fs := newFlagSet(p, "sleep", "")
	if _, code, ok := parseArgs(p, fs, args, "", 0, 0); !ok {
		return code
	}
	ctx, stop := p.untilStopped()
	defer stop()
	<-ctx.Done()
	return ExitOK
}
