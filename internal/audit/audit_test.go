package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func openTestLog(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := Open(path, func(s string) string { return strings.ReplaceAll(s, "hunter22", "[REDACTED:pw]") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, path
}

func appendN(t *testing.T, a *Log, n int) {
	t.Helper()
	for i := range n {
		kind := "intent"
		if i%2 == 1 {
			kind = "outcome"
		}
		if err := a.Append(&Record{Kind: kind, Handle: "h", Tool: "ssh_exec", Target: "web1", Command: "echo hunter22"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditChainVerifies(t *testing.T) {
	a, path := openTestLog(t)
	appendN(t, a, 5)
	a.Close()
	if n, err := Verify(path); err != nil || n != 5 {
		t.Fatalf("Verify = %d, %v; want 5, nil", n, err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte("hunter22")) || !bytes.Contains(data, []byte("[REDACTED:pw]")) {
		t.Errorf("audit log holds the secret or lacks the redaction marker:\n%s", data)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode = %v; want 0600", st.Mode().Perm())
	}
	// Reopening continues the chain.
	b, err := Open(path, func(s string) string { return s })
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, b, 2)
	b.Close()
	if n, err := Verify(path); err != nil || n != 7 {
		t.Fatalf("after reopen: Verify = %d, %v; want 7, nil", n, err)
	}
}

func TestAuditVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name     string
		tamper   func(lines []string) []string
		wantLine int
	}{
		{"edited middle line", func(l []string) []string {
			l[2] = strings.Replace(l[2], "ssh_exec", "http_request", 1)
			return l
		}, 3},
		{"removed middle line", func(l []string) []string { return append(l[:2], l[3:]...) }, 3},
		{"swapped lines", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2},
		{"edited last line", func(l []string) []string {
			l[5] = strings.Replace(l[5], "web1", "web2", 1)
			return l
		}, 6},
		{"removed last line", func(l []string) []string { return l[:5] }, 5},
		{"garbage line", func(l []string) []string { l[0] = "{not json"; return l }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, path := openTestLog(t)
			appendN(t, a, 6)
			data, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			out := strings.Join(tt.tamper(lines), "\n") + "\n"
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(path)
			var ae *Error
			if !errors.As(err, &ae) || ae.Line != tt.wantLine {
				t.Fatalf("Verify = %v; want an *Error at line %d", err, tt.wantLine)
			}
			if _, err := Open(path, func(s string) string { return s }); err == nil {
				t.Errorf("Open accepted a tampered log")
			}
		})
	}
}

func TestAuditConcurrentAppendsKeepWholeLines(t *testing.T) {
	a, path := openTestLog(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { appendN(t, a, 10) })
	}
	wg.Wait()
	if n, err := Verify(path); err != nil || n != 200 {
		t.Fatalf("Verify = %d, %v; want 200, nil", n, err)
	}
}

func TestAuditFailedWriteLeavesNoPartialRecord(t *testing.T) {
	a, path := openTestLog(t)
	appendN(t, a, 2)
	before, _ := os.ReadFile(path)
	// Close the file under the log: every write now fails.
	a.f.Close()
	if err := a.Append(&Record{Kind: "intent"}); err == nil {
		t.Fatal("Append on a broken file returned nil; want an error (fail closed)")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Errorf("a failed Append changed the file")
	}
}
