package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
)

// auditFixture writes a config whose state dir holds an audit log of n
// records, and returns the config path and the log.
func auditFixture(t *testing.T, n int) (string, *audit.Log) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("[server]\nstate_dir = %q\n", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := audit.Open(filepath.Join(dir, "audit.jsonl"), func(s string) string { return s })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for i := range n {
		if err := a.Append(&audit.Record{Kind: "intent", Handle: fmt.Sprintf("h%d", i), Tool: "ssh_exec", Target: "web1", Command: "uptime"}); err != nil {
			t.Fatal(err)
		}
	}
	return cfgPath, a
}

func TestAuditVerifyCommand(t *testing.T) {
	cfgPath, _ := auditFixture(t, 3)
	out, err := exec.Command(actiongwBinary(t), "audit", "verify", "-config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "3 records, chain intact") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	log := filepath.Join(filepath.Dir(cfgPath), "audit.jsonl")
	data, _ := os.ReadFile(log)
	edited := strings.Replace(string(data), `"handle":"h1"`, `"handle":"hX"`, 1)
	if err := os.WriteFile(log, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(actiongwBinary(t), "audit", "verify", "-config", cfgPath)
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "audit log line 2: edited") {
		t.Errorf("audit verify of an edited log: exit %d\n%s; want exit 1 naming line 2", cmd.ProcessState.ExitCode(), out)
	}
}

func TestAuditTailCommand(t *testing.T) {
	cfgPath, a := auditFixture(t, 5)
	out, err := exec.Command(actiongwBinary(t), "audit", "tail", "-n", "2", "-config", cfgPath).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "#4 intent  ssh_exec web1 handle=h3") || !strings.Contains(lines[1], `command="uptime"`) {
		t.Fatalf("audit tail -n 2: %v\n%s", err, out)
	}

	cmd := exec.Command(actiongwBinary(t), "audit", "tail", "-n", "0", "-f", "-config", cfgPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(300 * time.Millisecond)
	if err := a.Append(&audit.Record{Kind: "outcome", Handle: "h9", Tool: "ssh_exec", Target: "web1", Status: "exited"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, "#6 outcome ssh_exec web1 handle=h9") || !strings.Contains(line, `status="exited"`) {
			t.Errorf("audit tail -f printed %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("audit tail -f printed nothing for an appended record")
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("audit tail -f after SIGINT: %v; want exit 0", err)
	}
}
