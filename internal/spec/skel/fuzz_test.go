package skel

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/result/resulttest"
)

// netConfSeeds are real configs: the README's and demo's, a chained one of each result
// family, GC and STATUS ones, and some broken ones.
var netConfSeeds = []string{
	`{"cniVersion":"1.1.0","name":"demo","type":"loopback"}`,
	`{"cniVersion":"1.1.0","name":"demo","type":"bridge","bridge":"cni-demo0","isGateway":true,"ipMasq":true,` +
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`,
	`{"cniVersion":"1.0.0","name":"n","type":"portmap","capabilities":{"portMappings":true},` +
		`"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},` +
		`"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/x"}],` +
		`"ips":[{"address":"10.88.0.5/24","gateway":"10.88.0.1","interface":0}],"routes":[{"dst":"0.0.0.0/0"}]}}`,
	`{"cniVersion":"0.4.0","name":"n","type":"tuning","prevResult":{"cniVersion":"0.4.0",` +
		`"interfaces":[{"name":"eth0"}],"ips":[{"version":"4","interface":0,"address":"10.1.0.5/24"}],"dns":{"nameservers":["10.1.0.1"]}}}`,
	`{"cniVersion":"0.3.1","name":"n","type":"x","prevResult":{"ips":[{"version":"6","address":"fd00::5/64"}]}}`,
	`{"cniVersion":"0.2.0","name":"n","type":"x","prevResult":{"cniVersion":"0.2.0","ip4":{"ip":"10.1.0.5/24","routes":[{"dst":"0.0.0.0/0"}]}}}`,
	`{"name":"n","type":"x","dns":{"nameservers":["8.8.8.8"],"domain":"example.org","search":["a"],"options":["ndots:2"]}}`,
	`{"cniVersion":"1.1.0","name":"n","type":"x","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`,
	`{"cniVersion":"1.1.0","name":"n","type":"x","cni.dev/attachments":[{"containerID":"c1","ifname":"eth0"}]}`,
	`{"cniVersion":"1.0.0","name":"n","type":"x","prevResult":{"cniVersion":"0.4.0"}}`,
	`{"cniVersion":"2.0.0","name":"n","type":"x"}`,
	`{"cniVersion":"1.1.0","name":"bad name","type":"x"}`,
	`{"cniVersion":"1.1.0","name":"n","prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2"}]}}`,
	`[]`,
}

// FuzzParseNetConf checks skel's parse of the spec keys and prevResult for every
// command: a refusal is a CNI error of the codes a config can earn (1 version, 6
// decode, 7 invalid), and an accepted config has a valid network name, a version the
// plugin speaks and allows the command in, and a prevResult in exactly that version
// that prints and reads back the same.
func FuzzParseNetConf(f *testing.F) {
	for _, seed := range netConfSeeds {
		for _, cmd := range []string{CmdAdd, CmdCheck, CmdGC} {
			f.Add([]byte(seed), cmd)
		}
	}
	p := &Plugin{Name: "fuzz", Versions: version.From("0.2.0")}
	f.Fuzz(func(t *testing.T, data []byte, command string) {
		conf, prev, err := parseNetConf(p, command, data)
		if err != nil {
			codes := []uint{cnierror.CodeIncompatibleVersion, cnierror.CodeDecode, cnierror.CodeInvalidConfig}
			if !slices.Contains(codes, cnierror.Code(err)) {
				t.Fatalf("refused with code %d: %v", cnierror.Code(err), err)
			}
			return
		}
		v := conf.CNIVersion
		if v == "" {
			v = "0.1.0"
		}
		if !slices.Contains(p.Versions, v) || ValidateNetworkName(conf.Name) != nil {
			t.Fatalf("accepted version %q, name %q", v, conf.Name)
		}
		if m := minVersion(command); m != "" && !version.AtLeast(v, m) {
			t.Fatalf("accepted %s with version %s", command, v)
		}
		if prev == nil {
			return
		}
		if prev.CNIVersion != v {
			t.Fatalf("prevResult in version %q for a %q config", prev.CNIVersion, v)
		}
		resulttest.RequireRoundTrips(t, prev)
	})
}

// FuzzRun drives the exec'd entry point with arbitrary CNI_* variables and stdin, into
// a plugin that hands prevResult back: it always answers with exit 0 or 1, and on 1 with
// an error JSON of a known code other than 999 (nothing in this plugin can fail
// internally); an ADD that succeeds prints a result in the config's version.
func FuzzRun(f *testing.F) {
	for _, seed := range netConfSeeds {
		f.Add("ADD", "c1", "/var/run/netns/fuzz", "eth0", "", "/opt/cni/bin", []byte(seed))
	}
	f.Add("DEL", "c1", "", "eth0", "IgnoreUnknown=1;K8S_POD_NAME=x", "/opt/cni/bin", []byte(netConfSeeds[0]))
	f.Add("CHECK", "-bad", "/proc/self/ns/net", "eth0/1", "a=b=c", "", []byte(netConfSeeds[3]))
	f.Add("GC", "", "", "", "", "/opt/cni/bin", []byte(netConfSeeds[7]))
	f.Add("STATUS", "", "", "", "", "/opt/cni/bin", []byte(netConfSeeds[0]))
	f.Add("VERSION", "", "", "", "", "", []byte(`{"cniVersion":"1.1.0"}`))
	f.Add("", "", "", "", "", "", []byte{})
	f.Add("ADD", "c1", "/var/run/netns/fuzz", "0123456789abcdefg", "", "/opt/cni/bin", []byte(netConfSeeds[0]))
	f.Add("DEL", "c1", "", "0123456789abcdefg", "", "/opt/cni/bin", []byte(netConfSeeds[0]))
	echo := func(req *Request) (*result.Result, error) {
		if req.PrevResult != nil {
			return req.PrevResult, nil
		}
		return &result.Result{CNIVersion: req.Net.CNIVersion}, nil
	}
	ok := func(*Request) error { return nil }
	p := &Plugin{Name: "fuzz", Versions: version.All(), Add: echo, Del: ok, Check: ok, GC: ok, Status: ok}
	f.Fuzz(func(t *testing.T, command, containerID, netns, ifName, cniArgs, path string, stdin []byte) {
		env := []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=" + netns,
			"CNI_IFNAME=" + ifName, "CNI_ARGS=" + cniArgs, "CNI_PATH=" + path}
		var stdout, stderr bytes.Buffer
		status := Run(p, env, bytes.NewReader(stdin), &stdout, &stderr)
		switch {
		case status == 1:
			var e cnierror.Error
			if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
				t.Fatalf("exit 1 without error JSON: %v\n%s", err, stdout.Bytes())
			}
			if e.Code == 0 || e.Code == cnierror.CodeInternal || e.Msg == "" {
				t.Fatalf("error answer %+v", e)
			}
		case status != 0:
			t.Fatalf("exit status %d", status)
		case command == CmdAdd:
			var conf NetConf
			if err := json.Unmarshal(stdin, &conf); err != nil {
				t.Fatalf("ADD of undecodable config succeeded: %v", err)
			}
			v := conf.CNIVersion
			if v == "" {
				v = "0.1.0"
			}
			res, err := result.Parse(stdout.Bytes(), "")
			if err != nil || res.CNIVersion != v {
				t.Fatalf("ADD printed %s for a %s config (%v)", stdout.Bytes(), v, err)
			}
		case command == CmdVersion:
			var vi VersionInfo
			if err := json.Unmarshal(stdout.Bytes(), &vi); err != nil || vi.CNIVersion != version.Current {
				t.Fatalf("VERSION printed %s (%v)", stdout.Bytes(), err)
			}
		case stdout.Len() != 0 && command != "":
			t.Fatalf("%s printed %s", command, stdout.Bytes())
		}
	})
}

// FuzzParseCNIArgs checks the plugins' CNI_ARGS parser: a refusal is code 4; an
// accepted string holds only pairs whose key and value carry no ';' or '=', and the
// pairs written back out in any order parse to the same map.
func FuzzParseCNIArgs(f *testing.F) {
	for _, seed := range []string{
		"", "IP=10.1.0.5", "MAC=0a:58:0a:4d:00:97;IP=10.1.0.5/24,fd00::5/64;GATEWAY=10.1.0.1",
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc",
		"IgnoreUnknown=true;X=", "IP=a=b", "IP", ";", "=", "IP=1;IP=2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, err := ParseCNIArgs(raw, "IP", "MAC", "GATEWAY")
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidEnv {
				t.Fatalf("refused with code %d: %v", cnierror.Code(err), err)
			}
			return
		}
		pairs := make([]string, 0, len(args))
		for k, v := range args {
			if strings.ContainsAny(k, ";=") || strings.ContainsAny(v, ";=") {
				t.Fatalf("%q gave pair %q=%q", raw, k, v)
			}
			pairs = append(pairs, k+"="+v)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(pairs)))
		again, err := ParseCNIArgs(strings.Join(pairs, ";"), "IP", "MAC", "GATEWAY")
		if err != nil || !maps.Equal(args, again) {
			t.Fatalf("%q gave %v, written back %v (%v)", raw, args, again, err)
		}
	})
}
