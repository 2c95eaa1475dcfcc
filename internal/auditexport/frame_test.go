package auditexport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/rsyslogtest"
)

// auditLines appends recs to a real audit log, keyed, and returns the
// lines it wrote, as Options.Written gives them.
func auditLines(t testing.TB, redact func(string) string, recs ...*audit.Record) [][]byte {
	t.Helper()
	var (
		mu    sync.Mutex
		lines [][]byte
	)
	a, err := audit.OpenWith(context.Background(), filepath.Join(t.TempDir(), "audit.jsonl"), audit.Options{
		Key: audit.NewKey(), Redact: redact,
		Written: func(line []byte) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, bytes.Clone(line))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := a.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func exitCode(n int) *int { return &n }

// parseFrame parses one frame that must be all of b.
func parseFrame(t testing.TB, b []byte) *rsyslogtest.Message {
	t.Helper()
	m, rest, err := rsyslogtest.ParseFrame(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("frame %q: %v, %d bytes after it", b, err, len(rest))
	}
	return m
}

// TestFrame frames the lines of a real audit log: the header, every field
// as a parameter in the line's order, and the line itself as the MSG.
func TestFrame(t *testing.T) {
	when := time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.UTC)
	lines := auditLines(t, nil,
		&audit.Record{Time: when, Kind: audit.KindIntent, Handle: "h1", Tool: "ssh_exec", Target: "web1", Command: "uptime", Decision: "allow"},
		&audit.Record{Time: when, Kind: audit.KindIntent, Handle: "h2", Tool: "ssh_exec", Target: "web1", Command: "reboot", Decision: "deny", Rule: "deny_commands[0]"},
		&audit.Record{Time: when, Kind: audit.KindOutcome, Handle: "h1", Tool: "ssh_exec", Target: "web1", Status: "exited", ExitCode: exitCode(0),
			Streams: map[string]audit.Stream{"stdout": {Bytes: 3, SHA256: strings.Repeat("a", 64)}}},
	)
	enc := newEncoder("gw.example", 4242)
	tests := []struct {
		line     []byte
		pri      int
		msgID    string
		wantSome map[string]string
	}{
		{lines[0], 86, "key", map[string]string{"seq": "1", "kind": "key"}},
		{lines[1], 86, "intent", map[string]string{"seq": "2", "command": "uptime", "decision": "allow", "time": "2025-03-04T05:06:07.891234567Z"}},
		{lines[2], 84, "intent", map[string]string{"command": "reboot", "rule": "deny_commands[0]"}},
		{lines[3], 86, "outcome", map[string]string{"exit_code": "0", "streams": `{"stdout":{"bytes":3,"sha256":"` + strings.Repeat("a", 64) + `"}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.msgID, func(t *testing.T) {
			b := enc.frame(nil, tt.line, false)
			n, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
			if got := len(b) - len(strconv.Itoa(n)) - 1; got != n {
				t.Errorf("MSG-LEN %d; the message has %d bytes", n, got)
			}
			m := parseFrame(t, b)
			if m.Priority != tt.pri || m.Hostname != "gw.example" || m.AppName != "actiongw" || m.ProcID != "4242" || m.MsgID != tt.msgID {
				t.Errorf("header %+v; want PRI %d, gw.example actiongw 4242 %s", m, tt.pri, tt.msgID)
			}
			if tt.msgID != "key" && m.Timestamp != "2025-03-04T05:06:07.891234Z" {
				t.Errorf("TIMESTAMP %q; want 2025-03-04T05:06:07.891234Z (6 digits at most)", m.Timestamp)
			}
			if !m.BOM || !bytes.Equal(m.Msg, tt.line) {
				t.Errorf("MSG %q (BOM %v); want the line with a BOM", m.Msg, m.BOM)
			}
			if len(m.SD) != 1 || m.SD[0].ID != sdID {
				t.Fatalf("structured data %+v; want one element %s", m.SD, sdID)
			}
			for name, want := range tt.wantSome {
				if got, _ := m.Param(sdID, name); got != want {
					t.Errorf("%s=%q; want %q", name, got, want)
				}
			}
			// Every field of the line, in its order.
			var names []string
			for _, p := range m.SD[0].Params {
				names = append(names, p.Name)
			}
			if want := keysInOrder(t, tt.line); !reflect.DeepEqual(names, want) {
				t.Errorf("parameters %v; want the line's fields %v", names, want)
			}
		})
	}
	m := parseFrame(t, enc.frame(nil, lines[1], true))
	if len(m.SD) != 2 || m.SD[1].ID != resentID || len(m.SD[1].Params) != 0 {
		t.Errorf("a resent record's structured data %+v; want the record's element, then [%s]", m.SD, resentID)
	}
}

// keysInOrder returns the top-level keys of a JSON object line, in order.
func keysInOrder(t testing.TB, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.Token()
	var keys []string
	for dec.More() {
		k, _ := dec.Token()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
	}
	return keys
}

// TestRecordFieldNames checks that every field a record can have is a
// valid SD-NAME: one that were not would be missing from the structured
// data (though not from the MSG).
func TestRecordFieldNames(t *testing.T) {
	rt := reflect.TypeFor[audit.Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if !validSDName(name) {
			t.Errorf("audit.Record.%s: json name %q is not a valid SD-NAME", rt.Field(i).Name, name)
		}
	}
}

// TestFrameHostile: what an agent puts in a command cannot end the
// parameter, add an element, change the header, or put a control
// character or line break into the structured data; a secret the log
// redacts is redacted in the export too (it is the same line); a huge
// field is cut as in the log.
func TestFrameHostile(t *testing.T) {
	const secret = "s3cr3t-t0ken-value"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED:api-token]") }
	commands := []string{
		`echo "] [evil@32473 kind="seal"] x`,
		`a\" b\\] c\`,
		"new\nline\ttab \x01 é \u2028",
		"x\nJan  1 00:00:00 gw sshd[1]: Accepted password for root\r\x00\x1b[2J\x7f\u0085\u2029 \\u000a \xff",
		"curl -H 'Authorization: Bearer " + secret + "'",
		strings.Repeat(`"]\`, 400_000), // 1.2 MB, cut to a prefix
	}
	var recs []*audit.Record
	for _, c := range commands {
		recs = append(recs, &audit.Record{Kind: audit.KindIntent, Handle: "h", Tool: "ssh_exec", Target: "web1", Command: c, Decision: "allow"})
	}
	lines := auditLines(t, redact, recs...)[1:] // after the key record
	enc := newEncoder("h", 1)
	for i, line := range lines {
		var rec audit.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		b := enc.frame(nil, line, false)
		m := parseFrame(t, b)
		if len(m.SD) != 1 || m.MsgID != "intent" || m.Priority != 86 {
			t.Errorf("command %d: header %+v; want one element, an intent, PRI 86", i, m)
		}
		if got, _ := m.Param(sdID, "command"); got != controlsEscaped(rec.Command) {
			t.Errorf("command %d: parameter %.80q; want the logged %.80q, controls escaped", i, got, controlsEscaped(rec.Command))
		}
		if c, ok := controlIn(b[:len(b)-len(m.Msg)]); ok {
			t.Errorf("command %d: the frame before the MSG holds %U", i, c)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("command %d: the secret is in the frame", i)
		}
		if len(b) > 2*audit.MaxLineBytes+1024 {
			t.Errorf("command %d: a frame of %d bytes", i, len(b))
		}
	}
	var huge audit.Record
	json.Unmarshal(lines[len(lines)-1], &huge)
	if huge.Cut["command"].Bytes != 1_200_000 || len(huge.Command) > 2048 {
		t.Fatalf("the log kept %d bytes of the huge command, cut %+v; want it cut", len(huge.Command), huge.Cut)
	}
	m := parseFrame(t, enc.frame(nil, lines[len(lines)-1], false))
	if got, _ := m.Param(sdID, "cut"); !strings.Contains(got, `"command":{"bytes":1200000,`) {
		t.Errorf("cut=%q; want the command's size and hash", got)
	}
}

// TestFrameNoControlBytes: the agent's command is copied into the
// SD-PARAM decoded, so a newline, CR, NUL or ESC in it would reach the
// receiver as a raw byte (the MSG, JSON, has them escaped). A receiver
// that stores messages a line each without escaping control characters
// (rsyslog with parser.escapeControlCharactersOnReceive off, syslog-ng's
// default, many SIEM forwarders) would then show forged lines.
func TestFrameNoControlBytes(t *testing.T) {
	line := []byte(`{"seq":2,"kind":"intent","command":"x\nJan  1 00:00:00 gw sshd[1]: Accepted password for root\r\u0000\u001b[2J\u007f\u0085"}`)
	b := newEncoder("h", 1).frame(nil, line, false)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			t.Fatalf("frame byte %d is %#x: a control character in the clear: %q", i, c, b)
		}
	}
	if bytes.Contains(b, []byte("\u0085")) {
		t.Errorf("frame holds U+0085 (NEL) raw: %q", b)
	}
}

func TestHeaderField(t *testing.T) {
	tests := []struct{ in, want string }{
		{"host.example", "host.example"},
		{"", "-"},
		{"bad host\x00é", "badhost"},
		{strings.Repeat("x", 300), strings.Repeat("x", 255)},
	}
	for _, tt := range tests {
		if got := headerField(tt.in, 255); got != tt.want {
			t.Errorf("headerField(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzFrame frames any line and parses the frame back with a strict RFC
// 5424 parser: the length is exact, the MSG is the line, nothing before
// it is a control character or line break, and, for a JSON object, the
// parameters are its fields, valued as a plain decoder values them with
// controls escaped.
func FuzzFrame(f *testing.F) {
	for _, l := range auditLines(f, nil,
		&audit.Record{Kind: audit.KindIntent, Handle: "h", Tool: "ssh_exec", Target: "t", Command: `x"] \ y`, Env: "A=1\nB=2"},
		&audit.Record{Kind: audit.KindOutcome, Handle: "h", Status: "exited", ExitCode: exitCode(3), Streams: map[string]audit.Stream{"stdout": {Bytes: 1}}},
	) {
		f.Add(l, false)
	}
	f.Add([]byte(`{"a":null,"b":[1,{"c":"]"}],"=":1,"`+strings.Repeat("n", 33)+`":2,"d":"\u0000\"\\]"}`), true)
	f.Add([]byte(`{"x":1,"x":2}`), false)
	f.Add([]byte("{\"c\":\"\\n\\r\\u001b\u0085\u2028\x7f\\\\u000a\",\"o\":{\"\u2029\":\"\xff\\t\"}}"), false)
	f.Add([]byte("\xff\xfe not utf-8"), false)
	f.Add([]byte(`{"time":"99999-01-01T00:00:00Z","kind":"in tent"}`), false)
	enc := newEncoder("fuzz", 7)
	f.Fuzz(func(t *testing.T, line []byte, resent bool) {
		b := enc.frame([]byte("prefix"), line, resent)
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("frame overwrote what dst held")
		}
		m := parseFrame(t, b[len("prefix"):])
		if !bytes.Equal(m.Msg, line) || m.BOM != utf8.Valid(line) {
			t.Fatalf("MSG %q (BOM %v); want the line %q", m.Msg, m.BOM, line)
		}
		if c, ok := controlIn(b[:len(b)-len(m.Msg)]); ok {
			t.Fatalf("the frame before the MSG holds %U: %q", c, b)
		}
		var obj map[string]json.RawMessage
		isObj := json.Valid(line) && json.Unmarshal(line, &obj) == nil && obj != nil
		e, ok := m.Element(sdID)
		if ok != isObj {
			t.Fatalf("element %s: %v; want it iff the line is a JSON object (%v)", sdID, ok, isObj)
		}
		if _, ok := m.Element(resentID); ok != resent {
			t.Fatalf("element %s: %v; want %v", resentID, ok, resent)
		}
		if !isObj {
			return
		}
		seen := map[string]bool{}
		for _, p := range e.Params {
			raw, ok := obj[p.Name]
			if !ok {
				t.Fatalf("parameter %q is no field of the line", p.Name)
			}
			seen[p.Name] = true
			if duplicated(line, p.Name) {
				continue // the map kept only the last
			}
			want := string(raw)
			if raw[0] == '"' {
				json.Unmarshal(raw, &want)
			}
			if want = controlsEscaped(want); p.Value != want {
				t.Fatalf("%s=%q; want %q", p.Name, p.Value, want)
			}
		}
		for name, raw := range obj {
			if validSDName(name) && string(raw) != "null" && !seen[name] && !duplicated(line, name) {
				t.Fatalf("field %q of the line is no parameter", name)
			}
		}
	})
}

// duplicated reports whether the JSON object line has the key name more
// than once, when the last one wins in a map.
func duplicated(line []byte, name string) bool {
	n := 0
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.Token()
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
		if k == name {
			n++
		}
	}
	return n > 1
}

// controlsEscaped is s as a parameter value holds it: each control
// character (unicode.IsControl) and line or paragraph separator as
// \uXXXX, a byte that is not UTF-8 as U+FFFD.
func controlsEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// controlIn returns the first control character or line or paragraph
// separator in b, a byte that is not UTF-8 read as U+FFFD.
func controlIn(b []byte) (rune, bool) {
	for _, r := range string(b) {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return r, true
		}
	}
	return 0, false
}
