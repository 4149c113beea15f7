// Command extipam is a stand-in external IPAM plugin for the delegation tests. It
// records what it was given (environment and stdin) into the file named by the
// config's ipam.record, writes a line to stderr, and answers according to ipam.mode:
// "result" prints a fixed 1.0.0 result, "noversion" the same without cniVersion,
// "error" a CNI error with code 11, "silent" exits 1 with nothing on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	stdin, _ := io.ReadAll(os.Stdin)
	var conf struct {
		IPAM struct {
			Mode   string `json:"mode"`
			Record string `json:"record"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		fmt.Fprintln(os.Stderr, "extipam: bad config:", err)
		os.Exit(1)
	}
	if conf.IPAM.Record != "" {
		rec, _ := json.Marshal(map[string]any{"env": os.Environ(), "stdin": string(stdin)})
		f, err := os.OpenFile(conf.IPAM.Record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			f.Write(append(rec, '\n'))
			f.Close()
		}
	}
	fmt.Fprintln(os.Stderr, "extipam: called for", os.Getenv("CNI_COMMAND"))
	if os.Getenv("CNI_COMMAND") != "ADD" {
		return
	}
	body := `"ips": [{"address": "10.77.0.5/24", "gateway": "10.77.0.1"}], "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.77.0.53"]}`
	switch strings.ToLower(conf.IPAM.Mode) {
	case "noversion":
		fmt.Printf("{%s}\n", body)
	case "error":
		fmt.Println(`{"cniVersion": "1.0.0", "code": 11, "msg": "pool busy", "details": "try later"}`)
		os.Exit(1)
	case "silent":
		fmt.Fprintln(os.Stderr, "extipam: something broke")
		os.Exit(1)
	default:
		fmt.Printf("{\"cniVersion\": \"1.0.0\", %s}\n", body)
	}
}
