package main

import (
	"strings"
	"testing"
	"unicode"

	"github.com/actiongw/actiongw/internal/audit"
)

// TestAuditTailDrawsEveryCharacter: a field that holds a character which
// prints but draws nothing (a Hangul filler, a variation selector) is
// shown escaped, so "./public\u3164" does not read as "./public".
func TestAuditTailDrawsEveryCharacter(t *testing.T) {
	for _, v := range []string{"chmod -R 777 ./public\u3164", "rm x\ufe0f", "ls \u2800"} {
		line := formatAuditRecord(&audit.Record{Kind: audit.KindIntent, Tool: "ssh_exec", Target: "box", Command: v})
		if !strings.Contains(line, `command="`) || !strings.Contains(line, `\u`) {
			t.Errorf("formatAuditRecord with command %+q = %q; want the command quoted with its invisible character escaped", v, line)
		}
		for _, r := range line {
			if r > unicode.MaxASCII {
				t.Errorf("formatAuditRecord with command %+q printed %U", v, r)
			}
		}
	}
}

// TestAuditTailStreamOrder: an outcome's streams are printed in name
// order, so two lines of the same outcome read the same.
func TestAuditTailStreamOrder(t *testing.T) {
	r := &audit.Record{Kind: audit.KindOutcome, Tool: "ssh_exec", Target: "box",
		Streams: map[string]audit.Stream{"stdout": {Bytes: 3}, "stderr": {Bytes: 2}, "body": {Bytes: 1}}}
	for range 20 {
		if line := formatAuditRecord(r); !strings.Contains(line, " body=1B stderr=2B stdout=3B") {
			t.Fatalf("formatAuditRecord = %q; want the streams in name order", line)
		}
	}
}

// TestAuditTailSecretsSeen: an outcome that names secrets its target was
// never sent shows their names.
func TestAuditTailSecretsSeen(t *testing.T) {
	r := &audit.Record{Kind: audit.KindOutcome, Tool: "ssh_exec", Target: "box", SecretsSeen: []string{"api-token", "db-password"}}
	if line := formatAuditRecord(r); !strings.Contains(line, ` secrets_seen="api-token,db-password"`) {
		t.Errorf("formatAuditRecord = %q; want the secrets seen named", line)
	}
}
