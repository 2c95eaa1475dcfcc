package rsyslogtest

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // Param("a@1", "p"), or the error's start
	}{
		{"escapes", `<86>1 - h app 1 - [a@1 p="x\"y\\z\]w\n"] m`, `x"y\z]w\n`},
		{"nil SD", `<86>1 - h app 1 - - m`, ""},
		{"unescaped ]", `<86>1 - h app 1 - [a@1 p="x]y"] m`, "rfc5424: an unescaped ]"},
		{"no closing quote", `<86>1 - h app 1 - [a@1 p="x`, "rfc5424: PARAM-VALUE without"},
		{"long name", `<86>1 - h app 1 - [a@1 ` + strings.Repeat("n", 33) + `="x"] m`, "rfc5424: SD-NAME"},
		{"no version", `<86> - h app 1 - - m`, "rfc5424: VERSION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got, _ = m.Param("a@1", "p")
			}
			if !strings.HasPrefix(got, tt.want) || (tt.want == "" && got != "") {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestParseFrame(t *testing.T) {
	msg := "<86>1 - h app 1 - - \xef\xbb\xbfhello"
	n := strconv.Itoa(len(msg))
	m, rest, err := ParseFrame([]byte(n + " " + msg + "next"))
	if err != nil || string(m.Msg) != "hello" || !m.BOM || string(rest) != "next" {
		t.Fatalf("got %+v, rest %q, %v", m, rest, err)
	}
	if _, _, err := ParseFrame([]byte(strconv.Itoa(len(msg)+1) + " " + msg)); err == nil {
		t.Errorf("a frame longer than the bytes given parsed")
	}
}

// TestServer sends a message to a real rsyslogd, in plain TCP and in TLS,
// and reads it back as received; rsyslogd answers a half-close by closing
// its side, and never creates /dev/log.
func TestServer(t *testing.T) {
	_, errBefore := os.Stat("/dev/log")
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[useTLS], func(t *testing.T) {
			s := Start(t, Options{TLS: useTLS})
			var c net.Conn
			var err error
			if useTLS {
				c, err = tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: s.CA, ServerName: "localhost"})
			} else {
				c, err = net.Dial("tcp", s.Addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			msg := `<86>1 2025-01-02T03:04:05.000006Z h actiongw 1 intent [a@1 p="v\]"] body`
			frame := strconv.Itoa(len(msg)) + " " + msg
			if _, err := c.Write([]byte(frame + frame)); err != nil {
				t.Fatal(err)
			}
			// rsyslogd answers a half-close by closing its side, once it
			// has read everything: auditexport's Close relies on it.
			// (Read under TLS: what rsyslogd sends back, at most a
			// close_notify, is read raw.)
			raw := c
			if tc, ok := c.(*tls.Conn); ok {
				if err := tc.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				raw = tc.NetConn()
			}
			if err := raw.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			raw.SetReadDeadline(time.Now().Add(time.Minute))
			if n, err := io.Copy(io.Discard, raw); err != nil {
				t.Errorf("after the half-close: %v (%d bytes read); want rsyslogd to close its side", err, n)
			}
			c.Close()
			var got []Received
			testenv.WaitFor(t, 30*time.Second, "two messages", func() bool { got = s.Received(); return len(got) >= 2 })
			want := Received{Raw: msg, AppName: "actiongw", Hostname: "h", MsgID: "intent", SD: `[a@1 p="v\]"]`}
			if got[0] != want || got[1] != want {
				t.Errorf("received %+v; want %+v twice", got, want)
			}
			if _, err := os.Stat(filepath.Join(s.dir, "rsyslogd.pid")); err != nil {
				t.Errorf("no pid file in the test's directory: %v", err)
			}
		})
	}
	if _, err := os.Stat("/dev/log"); os.IsNotExist(errBefore) && !os.IsNotExist(err) {
		t.Errorf("rsyslogd created /dev/log")
	}
}
