// Command crio-runc is the OCI runtime a CRI-O node of make test-crio runs: runc, with
// what containerd's restrict_oom_score_adj does for the containerd suite. CRI-O gives
// every pod's infra container an oomScoreAdj of -998; where the machine withholds
// CAP_SYS_RESOURCE (a CI sandbox may), runc cannot lower a process's score and the pod
// fails to start. On `create`, crio-runc raises a bundle's oomScoreAdj to its own
// process's score when it is lower, then runs runc with the same arguments. Nothing
// about networking changes.
//
//	crio-runc [runc's global flags] create --bundle DIR ...
//
// The path of runc comes from the CRIO_RUNC environment variable (CRI-O passes its
// environment to conmon, and conmon to the runtime).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	runc := os.Getenv("CRIO_RUNC")
	if runc == "" {
		fail(errors.New("CRIO_RUNC names runc"))
	}
	if slices.Contains(os.Args[1:], "create") {
		if err := restrictOOMScoreAdj(os.Args[1:]); err != nil {
			fail(err)
		}
	}
	fail(syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ()))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crio-runc:", err)
	os.Exit(1)
}

// bundle is the --bundle (or -b) argument of runc's command line, "." when none.
func bundle(args []string) string {
	for i, a := range args {
		switch {
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			return strings.TrimPrefix(a, "--bundle=")
		}
	}
	return "."
}

// restrictOOMScoreAdj raises the bundle's process.oomScoreAdj to this process's own
// score when it is lower, as containerd's restrict_oom_score_adj does. It rewrites
// config.json only then, keeping every other field as it is.
func restrictOOMScoreAdj(args []string) error {
	path := filepath.Join(bundle(args), "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return err
	}
	floor, err := strconv.Atoi(strings.TrimSpace(string(own)))
	if err != nil {
		return fmt.Errorf("/proc/self/oom_score_adj: %w", err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var process map[string]json.RawMessage
	if err := json.Unmarshal(spec["process"], &process); err != nil {
		return fmt.Errorf("%s: process: %w", path, err)
	}
	var adj int
	if raw, ok := process["oomScoreAdj"]; !ok || json.Unmarshal(raw, &adj) != nil || adj >= floor {
		return nil
	}
	process["oomScoreAdj"] = json.RawMessage(strconv.Itoa(floor))
	if spec["process"], err = json.Marshal(process); err != nil {
		return err
	}
	if data, err = json.Marshal(spec); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
