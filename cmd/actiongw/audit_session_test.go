package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/audit"
)

// What an agent typed into a session, and what a remote program drew in
// its recording, reach the person's terminal escaped: a title, a
// clipboard write, a query or a C1 control never as codes.
func TestAuditSessionEscaped(t *testing.T) {
	evil := "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[6n\u009b31m\x7f"
	line := formatAuditRecord(&audit.Record{Kind: audit.KindInput, Tool: "ssh_session_send", Target: "box", Handle: "out_x",
		Input: evil, Keys: "Enter Ctrl-C", Secret: "enable"})
	var rec bytes.Buffer
	(&controlEscaper{w: &rec}).Write([]byte(`[0.5,"o","` + evil + `"]` + "\n"))
	for name, out := range map[string]string{"audit tail": line, "audit recording": rec.String()} {
		if strings.ContainsAny(out, "\x1b\x07\x7f\u009b") {
			t.Errorf("%s writes a terminal code raw: %q", name, out)
		}
	}
	for _, want := range []string{`keys="Enter Ctrl-C"`, `secret="enable"`, `input="\x1b]0;pwned`} {
		if !strings.Contains(line, want) {
			t.Errorf("audit tail line %q lacks %s", line, want)
		}
	}
	if got := rec.String(); !strings.HasSuffix(got, "\"]\n") || !strings.Contains(got, `\u001b]0;pwned`) {
		t.Errorf("audit recording line %q; want the codes as \\u escapes, the line whole", got)
	}
}
