//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

// auditFixture writes a config whose state dir holds an audit log opened
// with opts and n records, and returns the config path, the log and its
// path. The log is closed when the test ends.
func auditFixture(t *testing.T, n int, opts audit.Options) (string, *audit.Log, string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "[server]\nstate_dir = %q\n", dir), 0o600); err != nil {
		t.Fatal(err)
	}
	path := audit.Path(dir)
	a, err := audit.OpenWith(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for i := range n {
		if err := a.Append(&audit.Record{Kind: audit.KindIntent, Handle: fmt.Sprintf("h%d", i), Tool: "ssh_exec", Target: "web1", Command: "uptime"}); err != nil {
			t.Fatal(err)
		}
	}
	return cfgPath, a, path
}

// runAudit runs `actiongw audit ARGS...` with the keyring service given
// (never the person's own) and returns its output and exit status.
func runAudit(t *testing.T, service string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(actiongwBinary(t), append([]string{"audit"}, args...)...)
	cmd.Env = append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+service)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func wantOutput(t *testing.T, what, out string, code, wantCode int, want ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit status %d; want %d\n%s", what, code, wantCode, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestAuditVerifyCommand verifies an unkeyed log, as on a machine without
// a keyring, and one edited.
func TestAuditVerifyCommand(t *testing.T) {
	service := "actiongw-test-" + randomHex(t, 6)
	cfgPath, a, path := auditFixture(t, 3, audit.Options{})
	a.Close()
	out, code := runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify", out, code, 0, "3 records in 1 files", "the hash chain is intact",
		"not proved:", "the log is not keyed: anyone who could write the state directory could have rewritten it", "keyring:")

	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), `"handle":"h1"`, `"handle":"hX"`, 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify of an edited log", out, code, 1, "good up to record 1; then:", "audit.jsonl line 2: edited", "run: actiongw audit seal")
}

// TestAuditSealCommand seals a log damaged by a line longer than any
// record, as the version before wrote: verify names it, seal moves it
// aside, and the new chain verifies.
func TestAuditSealCommand(t *testing.T) {
	service := "actiongw-test-" + randomHex(t, 6)
	cfgPath, a, path := auditFixture(t, 3, audit.Options{})
	a.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	fmt.Fprintf(f, `{"seq":4,"command":"%s"}`+"\n", strings.Repeat(`\u003c`, 4<<20))
	f.Close()
	out, code := runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify of a long line", out, code, 1, "good up to record 3; then:", "audit.jsonl line 4: the line is", "longer than any record", "run: actiongw audit seal")

	out, code = runAudit(t, service, "seal", "-config", cfgPath)
	wantOutput(t, "audit seal", out, code, 0, "damage: "+path+" line 4", "moved the damaged log's files to", "good up to record 3", "restart any actiongw serve")
	out, code = runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify after seal", out, code, 0, "1 records in 1 files", "this chain starts with a seal record")
	out, code = runAudit(t, service, "tail", "-config", cfgPath)
	wantOutput(t, "audit tail after seal", out, code, 0, "#1 seal", "sealed=audit-sealed-", "line=4 last_seq=3")
	out, code = runAudit(t, service, "seal", "-config", cfgPath)
	wantOutput(t, "audit seal of a good log", out, code, 1, "nothing to seal")
}

// TestAuditKeyringCommands runs verify and seal with the audit key and a
// checkpoint in the keyring, as serve keeps them: verify proves more, and
// finds the log emptied, which the files alone cannot show.
func TestAuditKeyringCommands(t *testing.T) {
	testenv.SecretService(t)
	ctx := context.Background()
	service := "actiongw-test-" + randomHex(t, 6)
	kr := &secrets.Keyring{Service: service}
	key := audit.NewKey()
	if err := kr.Set(ctx, audit.KeyName, key); err != nil {
		t.Fatal(err)
	}
	var cpName string
	t.Cleanup(func() {
		kr.Delete(ctx, audit.KeyName)
		kr.Delete(ctx, cpName)
	})
	save := func(cp audit.Checkpoint) {
		text, _ := cp.MarshalText()
		if err := kr.Set(ctx, cpName, text); err != nil {
			t.Errorf("saving the checkpoint: %v", err)
		}
	}
	dir := t.TempDir()
	cpName = audit.CheckpointName(dir)
	cfgPath := filepath.Join(dir, "config.toml")
	os.WriteFile(cfgPath, fmt.Appendf(nil, "[server]\nstate_dir = %q\n", dir), 0o600)
	path := audit.Path(dir)
	a, err := audit.OpenWith(ctx, path, audit.Options{Key: key, SaveCheckpoint: save})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := a.Append(&audit.Record{Kind: audit.KindIntent, Handle: "h", Tool: "ssh_exec", Target: "web1"}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close() // saves the checkpoint: record 5

	out, code := runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify", out, code, 0, "records 1 to 5 carry valid macs", "the head file, authenticated by the key, names record 5",
		"the log holds record 5 as the checkpoint kept outside the state directory names it")
	if strings.Contains(out, "keyring:") || strings.Contains(out, string(key)) {
		t.Errorf("audit verify with the keyring says it missed something, or prints the key:\n%s", out)
	}

	for _, p := range []string{path, path + ".head"} {
		os.WriteFile(p, nil, 0o600)
	}
	out, code = runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify of an emptied log", out, code, 1, "the checkpoint kept outside the state directory names record 5", "emptied or cut short")

	out, code = runAudit(t, service, "seal", "-config", cfgPath)
	wantOutput(t, "audit seal", out, code, 0, "moved the damaged log's files to")
	v, err := kr.Get(ctx, cpName)
	if err != nil || !strings.HasPrefix(string(v.Reveal()), "1:") {
		t.Fatalf("checkpoint after seal: %v; want the new chain's record 1", err)
	}
	out, code = runAudit(t, service, "verify", "-config", cfgPath)
	wantOutput(t, "audit verify after seal", out, code, 0, "this chain starts with a seal record", "records 1 to 1 carry valid macs", "the log holds record 1")
	if _, err := audit.OpenWith(ctx, path, audit.Options{Key: key, Checkpoint: &audit.Checkpoint{Seq: 1, MAC: strings.TrimPrefix(string(v.Reveal()), "1:")}}); err != nil {
		t.Errorf("serve's open after seal: %v", err)
	}
}

func TestAuditTailCommand(t *testing.T) {
	service := "actiongw-test-" + randomHex(t, 6)
	cfgPath, a, _ := auditFixture(t, 30, audit.Options{RotateBytes: 2048})
	out, code := runAudit(t, service, "tail", "-n", "12", "-config", cfgPath)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 12 || !strings.Contains(lines[0], "#19 intent  ssh_exec web1 handle=h18") || !strings.Contains(lines[11], `#30 intent  ssh_exec web1 handle=h29 command="uptime"`) {
		t.Fatalf("audit tail -n 12 across rotated files: exit %d\n%s", code, out)
	}

	cmd := exec.Command(actiongwBinary(t), "audit", "tail", "-n", "1", "-f", "-config", cfgPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lineCh := make(chan string)
	go func() {
		defer close(lineCh)
		r := bufio.NewScanner(stdout)
		for r.Scan() {
			lineCh <- r.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case line := <-lineCh:
			if !strings.Contains(line, want) {
				t.Fatalf("audit tail -f printed %q; want %q", line, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("audit tail -f printed nothing; want %q", want)
		}
	}
	next("#30 intent") // it follows from here
	// Enough records to rotate the file under it, more than once.
	for i := range 20 {
		if err := a.Append(&audit.Record{Kind: audit.KindOutcome, Handle: fmt.Sprintf("f%d", i), Tool: "ssh_exec", Target: "web1", Status: "exited"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		next(fmt.Sprintf("#%d outcome ssh_exec web1 handle=f%d", 31+i, i))
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("audit tail -f after SIGINT: %v; want exit 0", err)
	}
}
