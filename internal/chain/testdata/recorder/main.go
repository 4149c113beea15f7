// Command recorder is a test plugin for the chain runner: it appends every invocation
// (command, CNI_* variables, the trace context's variables, stdin) to the file named by its config's "recordFile",
// fails on request ("fail": {"ADD": {"code": 7, "msg": "..."}}, "stderrOnly": ["DEL"]),
// sleeps on request ("sleep": {"ADD": "10s"}), and on ADD passes prevResult through with
// one interface of its own appended. It uses only the standard library, like a
// third-party plugin would not share our code.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

type config struct {
	CNIVersion  string                     `json:"cniVersion"`
	RecordFile  string                     `json:"recordFile"`
	Fail        map[string]json.RawMessage `json:"fail"`
	StderrOnly  []string                   `json:"stderrOnly"`
	Sleep       map[string]string          `json:"sleep"`
	OmitVersion bool                       `json:"omitVersion"`
	PrevResult  map[string]any             `json:"prevResult"`
}

// Record is one line of the record file.
type record struct {
	Command string            `json:"command"`
	Env     map[string]string `json:"env"`
	Trace   map[string]string `json:"trace,omitempty"`
	Stdin   string            `json:"stdin"`
}

func main() { os.Exit(run()) }

func run() int {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		fmt.Println(`{"cniVersion":"1.1.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}`)
		return 0
	}
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var conf config
	if err := json.Unmarshal(stdin, &conf); err != nil {
		fmt.Printf(`{"code":6,"msg":%q}`+"\n", err.Error())
		return 1
	}
	if conf.RecordFile != "" {
		env, trace := map[string]string{}, map[string]string{}
		for _, kv := range os.Environ() {
			// The protocol's variables only: CNI_TEST_* belong to the test harness.
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, "CNI_") && !strings.HasPrefix(k, "CNI_TEST_") {
				env[k] = v
			}
			if k == "TRACEPARENT" || k == "TRACESTATE" || k == "BAGGAGE" {
				trace[k] = v
			}
		}
		line, _ := json.Marshal(record{Command: cmd, Env: env, Trace: trace, Stdin: string(stdin)})
		f, err := os.OpenFile(conf.RecordFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = f.Write(append(line, '\n'))
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if d, ok := conf.Sleep[cmd]; ok {
		dur, _ := time.ParseDuration(d)
		time.Sleep(dur)
	}
	if e, ok := conf.Fail[cmd]; ok {
		fmt.Println(string(e))
		return 1
	}
	if slices.Contains(conf.StderrOnly, cmd) {
		fmt.Fprintln(os.Stderr, "recorder: asked to fail without a message")
		return 1
	}
	if cmd != "ADD" {
		return 0
	}
	res := conf.PrevResult
	if res == nil {
		res = map[string]any{"cniVersion": conf.CNIVersion}
	}
	ifaces, _ := res["interfaces"].([]any)
	res["interfaces"] = append(ifaces, map[string]any{"name": "rec-" + os.Getenv("CNI_IFNAME"), "sandbox": os.Getenv("CNI_NETNS")})
	if conf.OmitVersion {
		delete(res, "cniVersion")
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}
