package wire

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		want  []string // dialable addresses, "!" for an alternative that cannot be used
		wrong string   // when the whole address is refused
	}{
		{addr: "unix:path=/run/dbus/system_bus_socket", want: []string{"/run/dbus/system_bus_socket"}},
		{addr: "unix:path=/tmp/a%20b,guid=0123", want: []string{"/tmp/a b"}},
		{addr: "unix:abstract=/tmp/dbus-x", want: []string{"@/tmp/dbus-x"}},
		{addr: "tcp:host=h,port=1;unix:path=/s;", want: []string{"!", "/s"}},
		{addr: "unix:tmpdir=/tmp", want: []string{"!"}},
		{addr: "unix:path=/a,abstract=b", want: []string{"!"}},
		{addr: "", wrong: "names no transport"},
		{addr: "unix", wrong: "no transport prefix"},
		{addr: "unix:path", wrong: "key=value"},
		{addr: "unix:path=/a,path=/b", wrong: "twice"},
		{addr: "unix:path=/a%2", wrong: "escape"},
		{addr: "unix:path=/a%zz", wrong: "escape"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			eps, err := parseAddress(tc.addr)
			if tc.wrong != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wrong)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, ep := range eps {
				if ep.err != nil {
					got = append(got, "!")
				} else {
					got = append(got, ep.addr)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDialTriesAlternativesInOrder(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })

	c, err := dial(context.Background(), "tcp:host=localhost;unix:path="+filepath.Join(dir, "missing")+";unix:path="+sock)
	require.NoError(t, err)
	c.Close()

	_, err = dial(context.Background(), "unix:path="+filepath.Join(dir, "missing")+";nope:x=y")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such file")
	assert.Contains(t, err.Error(), `transport "nope" is not supported`)
}

// fakeBus answers the SASL exchange with the given line after reading AUTH, and
// returns what the client sent in all.
func fakeBus(t *testing.T, answer string) (net.Conn, <-chan string) {
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	sent := make(chan string, 1)
	go func() {
		r := bufio.NewReader(server)
		var all strings.Builder
		line, _ := r.ReadString('\n')
		all.WriteString(line)
		_, _ = server.Write([]byte(answer))
		if strings.HasPrefix(answer, "OK") {
			line, _ = r.ReadString('\n')
			all.WriteString(line)
		}
		sent <- all.String()
	}()
	return client, sent
}

func TestAuthenticateSendsExternalWithHexUID(t *testing.T) {
	c, sent := fakeBus(t, "OK 1234deadbeef\r\n")
	require.NoError(t, authenticate(c, bufio.NewReader(c)))
	got := <-sent
	assert.Regexp(t, "^\x00AUTH EXTERNAL (3[0-9])+\r\nBEGIN\r\n$", got)
}

func TestAuthenticateReportsRefusal(t *testing.T) {
	for answer, want := range map[string]string{
		"REJECTED DBUS_COOKIE_SHA1\r\n": "rejected EXTERNAL authentication",
		"ERROR whatever\r\n":            "error: whatever",
		"DATA\r\n":                      "unexpected answer",
		"OK 12\n":                       "CRLF",
	} {
		t.Run(strings.TrimSpace(answer), func(t *testing.T) {
			c, _ := fakeBus(t, answer)
			err := authenticate(c, bufio.NewReader(c))
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}
