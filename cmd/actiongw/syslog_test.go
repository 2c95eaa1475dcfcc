//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/testkit/rsyslogtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestServeAuditSyslog runs `actiongw serve` with its audit trail exported
// to a real rsyslogd over TLS: health shows the counters, and when serve
// ends, every line of the local audit log has reached rsyslogd, in order,
// byte for byte, the agent's hostile command inside one parameter and the
// secret it echoed redacted as in the log.
func TestServeAuditSyslog(t *testing.T) {
	rs := rsyslogtest.Start(t, rsyslogtest.Options{TLS: true})
	s := startServedWith(t, servedOptions{tables: fmt.Sprintf(`
[audit]
syslog = "tls://%s"
syslog_ca_file = %q
syslog_server_name = "localhost"
`, rs.Addr, rs.CAFile)})

	r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/echo"})
	if r.IsError {
		t.Fatalf("http_request: %s", resultText(r))
	}
	hostile := `echo '"] [actiongw@32473 decision="deny"] \' ` + s.token
	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": hostile})
	if out := decode[gateway.SSHExecOutput](t, r); out.Status != "exited" {
		t.Fatalf("ssh_exec: %s", resultText(r))
	}

	// Running when serve ends: its outcome is written as serve stops,
	// and must still go out.
	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "sleep 600", "wait_s": 0})
	if out := decode[gateway.SSHExecOutput](t, r); out.Status != "running" {
		t.Fatalf("ssh_exec in the background: %s", resultText(r))
	}

	// The key record, an intent and an outcome per action that ended,
	// the background action's intent.
	const sent = 6
	var h healthExport
	testenv.WaitFor(t, time.Minute, "health to count every record sent", func() bool {
		h = decode[healthExport](t, s.call(t, "health", map[string]any{}))
		return h.AuditExport != nil && h.AuditExport.Sent == sent
	})
	if st := h.AuditExport; !st.Connected || st.Dropped != 0 || st.Lost != 0 || st.Queued != 0 {
		t.Errorf("health: audit_export %+v; want connected, nothing dropped, lost or queued", st)
	}
	s.client.Close() // serve cancels the action, then flushes the export

	b, err := os.ReadFile(filepath.Join(s.state, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	want := sent + 1 // the cancelled action's outcome
	if len(lines) != want || !bytes.Contains(lines[want-1], []byte(`"status":"cancelled"`)) {
		t.Fatalf("the local log has %d records, the last %s; want %d, the last the cancelled outcome", len(lines), lines[len(lines)-1], want)
	}
	var got []rsyslogtest.Received
	testenv.WaitFor(t, time.Minute, "every record at rsyslogd", func() bool { got = rs.Received(); return len(got) >= want })
	if len(got) != want {
		t.Fatalf("rsyslogd received %d messages; want %d", len(got), want)
	}
	hostileSeen := false
	for i, r := range got {
		m, err := rsyslogtest.Parse([]byte(r.Raw))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(m.Msg, lines[i]) || r.AppName != "actiongw" || len(m.SD) != 1 || m.SD[0].ID != "actiongw@32473" {
			t.Errorf("message %d: %q; want the log's line %q in one element", i, r.Raw, lines[i])
		}
		if strings.Contains(r.Raw, s.token) {
			t.Errorf("message %d carries the API token", i)
		}
		if cmd, _ := m.Param("actiongw@32473", "command"); strings.HasPrefix(cmd, "echo") {
			hostileSeen = true
			if d, _ := m.Param("actiongw@32473", "decision"); d != "allow" || cmd != strings.ReplaceAll(hostile, s.token, "[REDACTED:api-token]") {
				t.Errorf("message %d: command=%q decision=%q; want the whole command, redacted, allowed", i, cmd, d)
			}
		}
	}
	if !hostileSeen {
		t.Errorf("no message carries the hostile command")
	}
	if !strings.Contains(s.stderr.String(), "audit export: connected to the syslog receiver") {
		t.Errorf("serve's log does not say the export connected:\n%s", s.stderr)
	}
}

type healthExport struct {
	AuditExport *auditexport.Stats `json:"audit_export"`
}
