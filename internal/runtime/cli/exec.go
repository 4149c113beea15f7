package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/spec/skel"
)

// runExec runs one plugin once, with flags in place of the CNI_* environment.
func runExec(p Process, args []string) int {
	const usage = "PLUGIN ADD|DEL|CHECK|GC|STATUS|VERSION [flags]"
	fs := newFlagSet(p, "exec", usage)
	var c common
	c.register(fs, p)
	var a attachmentFlags
	netns := fs.String("netns", "", "container network namespace path (CNI_NETNS)")
	fs.StringVar(&a.ifName, "ifname", p.envOr("CNI_IFNAME", "eth0"), "interface name (CNI_IFNAME)")
	fs.StringVar(&a.containerID, "container-id", "", "container id (default: cnitool's, derived from --netns)")
	fs.StringVar(&a.cniArgs, "cni-args", p.envOr("CNI_ARGS", ""), "CNI_ARGS as K=V;K2=V2")
	confFile := fs.String("conf", "-", "plugin config file, - for stdin (not read for VERSION)")
	pos, code, ok := parseArgs(p, fs, args, usage, 2, 2)
	if !ok {
		return code
	}
	plugin, command := pos[0], strings.ToUpper(pos[1])
	r := c.runner(p)
	ctx := c.traced(context.Background(), p, "exec")
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	switch command {
	case skel.CmdVersion:
		vi, err := r.Version(ctx, plugin)
		if err != nil {
			return p.fail("exec", fmt.Errorf("plugin %q failed (VERSION): %w", plugin, err))
		}
		return p.printJSON("exec", vi)
	case skel.CmdAdd, skel.CmdDel, skel.CmdCheck, skel.CmdGC, skel.CmdStatus:
	default:
		return p.usageError(fs, "unknown command %q", pos[1])
	}
	conf, err := p.readConf(*confFile)
	if err != nil {
		return p.fail("exec", err)
	}
	att, err := a.attachment(*netns)
	if err != nil {
		return p.fail("exec", err)
	}
	if command == skel.CmdGC || command == skel.CmdStatus {
		att = chain.Attachment{} // libcni sends no container for these
	}
	res, err := r.Invoke(ctx, plugin, command, conf, att)
	if err != nil {
		return p.fail("exec", fmt.Errorf("plugin %q failed (%s): %w", plugin, command, err))
	}
	if res != nil {
		if err := res.Print(p.Stdout); err != nil {
			return p.fail("exec", err)
		}
	}
	return ExitOK
}

func (p Process) readConf(name string) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(p.Stdin)
		if err != nil {
			return nil, fmt.Errorf("reading config from stdin: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return data, nil
}

func (p Process) printJSON(cmd string, v any) int {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return p.fail(cmd, err)
	}
	fmt.Fprintln(p.Stdout, string(b))
	return ExitOK
}
