package console

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
)

// writeAudit writes a real audit log in a new state directory: a
// command, a request and a denied command, each intent with its
// outcome, and returns the directory and the log's key.
func writeAudit(t *testing.T) (string, audit.Key) {
	t.Helper()
	dir := t.TempDir()
	key := audit.NewKey()
	log, err := audit.OpenWith(context.Background(), audit.Path(dir), audit.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	exit0 := 0
	stopped := true
	now := time.Now().UTC()
	for _, r := range []audit.Record{
		{Kind: audit.KindIntent, Time: now.Add(-2 * time.Hour), Handle: "ssh-1", Tool: "ssh_exec", Target: "box", Command: "uptime", Decision: "allow"},
		{Kind: audit.KindOutcome, Time: now.Add(-2 * time.Hour), Handle: "ssh-1", Tool: "ssh_exec", Target: "box", Status: "exited", ExitCode: &exit0, DurationMS: 40},
		{Kind: audit.KindIntent, Time: now.Add(-10 * time.Minute), Handle: "http-2", Tool: "http_request", Target: "api", Method: "GET", Path: "/health", Decision: "allow"},
		{Kind: audit.KindIntent, Time: now.Add(-5 * time.Minute), Handle: "ssh-3", Tool: "ssh_exec", Target: "box", Command: "rm -rf /", Decision: "deny", Rule: "deny rm"},
		{Kind: audit.KindOutcome, Time: now.Add(-5 * time.Minute), Handle: "ssh-3", Tool: "ssh_exec", Target: "box", Status: "denied"},
		{Kind: audit.KindOutcome, Time: now.Add(-9 * time.Minute), Handle: "http-2", Tool: "http_request", Target: "api", Status: "cancelled", RemoteStopped: &stopped, DurationMS: 60000},
	} {
		if err := log.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, key
}

type auditAnswer struct {
	Entries []struct {
		Handle, Tool, Target, Status, Kind string
		Intent, Outcome                    *audit.Record
	}
	Targets, Tools, Statuses []string
	Total                    int
}

// TestAuditView: the log's actions, intent and outcome joined, the key
// record that starts its keyed part, filtered and downloaded.
func TestAuditView(t *testing.T) {
	dir, _ := writeAudit(t)
	s := startConsole(t, newFake(), dir)
	c := newClient(t, s)
	c.login(t)
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		query string
		want  string // handles, newest first
	}{
		{"", "(key) ssh-3 http-2 ssh-1"},
		{"?target=box", "ssh-3 ssh-1"},
		{"?tool=http_request", "http-2"},
		{"?status=denied", "ssh-3"},
		{"?status=exited&target=box", "ssh-1"},
		{"?since=" + since, "(key) ssh-3 http-2"},
		{"?until=" + since, "ssh-1"},
		{"?target=nowhere", ""},
		{"?limit=2", "(key) ssh-3"},
	} {
		var got auditAnswer
		c.getJSON(t, "/api/audit"+tc.query, &got)
		var handles []string
		for _, e := range got.Entries {
			handles = append(handles, cmp.Or(e.Handle, "("+e.Kind+")"))
			if e.Handle != "" && (e.Intent == nil || e.Outcome == nil) {
				t.Errorf("%s: %s holds intent %v, outcome %v; want both, joined by handle", tc.query, e.Handle, e.Intent != nil, e.Outcome != nil)
			}
		}
		if strings.Join(handles, " ") != tc.want {
			t.Errorf("/api/audit%s: %q; want %q", tc.query, handles, tc.want)
		}
	}
	var all auditAnswer
	c.getJSON(t, "/api/audit?target=nowhere", &all)
	if strings.Join(all.Targets, ",") != "api,box" || strings.Join(all.Statuses, ",") != "cancelled,denied,exited" {
		t.Errorf("filter values: targets %q, statuses %q", all.Targets, all.Statuses)
	}
	if code, _ := c.get(t, "/api/audit?since=yesterday"); code != http.StatusBadRequest {
		t.Errorf("a bad since: %d; want 400", code)
	}

	// The download: the filtered records, intent and outcome, in the
	// log's order, as JSON Lines.
	req, _ := http.NewRequest("GET", c.url("/api/audit.jsonl?target=box"), nil)
	resp, body := c.do(t, req)
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") {
		t.Errorf("Content-Disposition %q; want an attachment", cd)
	}
	var seqs []int64
	for line := range strings.Lines(body) {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Target != "box" {
			t.Errorf("a record of %q in the download filtered to box", r.Target)
		}
		seqs = append(seqs, r.Seq)
	}
	if len(seqs) != 4 || seqs[0] > seqs[1] || seqs[1] > seqs[2] || seqs[2] > seqs[3] {
		t.Errorf("downloaded seqs %v; want the 4 records of box in order", seqs)
	}
}

func TestAuditChainState(t *testing.T) {
	dir, key := writeAudit(t)
	s := startConsoleWith(t, Options{Watcher: newFake(), StateDir: dir, VerifyOptions: func(context.Context) (audit.VerifyOptions, string) {
		return audit.VerifyOptions{Key: key}, ""
	}})
	c := newClient(t, s)
	c.login(t)
	var st struct {
		Verified bool
		Text     string
		Damage   *audit.DamagedError
	}
	c.getJSON(t, "/api/verify", &st)
	if !st.Verified || st.Damage != nil || !strings.Contains(st.Text, "macs") {
		t.Errorf("a good log: verified %v, damage %v, text %q", st.Verified, st.Damage, st.Text)
	}
	if strings.Contains(c.seen.String(), strings.TrimSpace(string(key))) {
		t.Errorf("a response holds the audit key")
	}
	// One byte of the third record changed.
	path := audit.Path(dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"uptime"`) {
		t.Fatal("no uptime in the log")
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"uptime"`, `"uptimE"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.getJSON(t, "/api/verify", &st)
	if st.Verified || st.Damage == nil || st.Damage.Line == 0 || !strings.Contains(st.Text, "actiongw audit seal") || !strings.Contains(st.Text, "good up to record") {
		t.Errorf("a damaged log: verified %v, damage %+v, text %q; want damaged at a line, with the way out", st.Verified, st.Damage, st.Text)
	}
}
