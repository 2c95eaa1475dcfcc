//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestServeFaultSSHDKilled(t *testing.T) {
	s := startServed(t, "signal")
	pidFile := filepath.Join("/tmp", "actiongw-fault-"+randomHex(t, 6))
	t.Cleanup(func() { os.Remove(pidFile) })
	done := make(chan struct{})
	var r gateway.SSHExecOutput
	var text string
	go func() {
		defer close(done)
		res := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo $$ > " + pidFile + "; exec sleep 30"})
		r, text = decode[gateway.SSHExecOutput](t, res), resultText(res)
	}()
	pid := waitPID(t, pidFile)
	s.sshd.Crash()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("ssh_exec did not return after sshd was killed")
	}
	t.Logf("result after sshd died: %s", text)
	if r.Status != "failed" || r.Reason == "" {
		t.Errorf("status %q reason %q; want failed with a reason (text %q)", r.Status, r.Reason, text)
	}
	// Nothing could stop or see the remote process once sshd died: the
	// result must not claim it stopped.
	if r.RemoteStopped != nil && *r.RemoteStopped && proc.Alive(pid) {
		t.Errorf("remote_stopped true, but process %d is alive", pid)
	}
	res := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "true"})
	if !res.IsError || !strings.Contains(resultText(res), "box") {
		t.Errorf("call while sshd is down: %s; want a clear tool error", resultText(res))
	}
	s.sshd.Restart()
	s.promptly(t)
}

func TestServeFaultSpoolFull(t *testing.T) {
	testenv.Root(t, "mount, chattr")
	s := startServedWith(t, servedOptions{prepare: func(state string) {
		spool := filepath.Join(state, "spool")
		if err := os.MkdirAll(spool, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", spool).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", spool).Run() })
	}})
	const n = 4_000_000
	res := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "head -c 4000000 /dev/zero | tr '\\0' x"})
	out := decode[gateway.SSHExecOutput](t, res)
	sum := sha256.Sum256([]byte(strings.Repeat("x", n)))
	if out.Status != "exited" || out.Stdout.Bytes != n || out.Stdout.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("status %s bytes %d sha %s; want exited, %d bytes and the exact hash", out.Status, out.Stdout.Bytes, out.Stdout.SHA256, n)
	}
	if out.Stdout.SpoolError == "" || !strings.Contains(resultText(res), "spool error") {
		t.Errorf("spool_error %q, text %q; want the full disk reported", out.Stdout.SpoolError, resultText(res))
	}
	page := s.call(t, "read_output", map[string]any{"handle": out.Handle, "stream": "stdout", "offset": 3_000_000})
	if p := decode[output.Page](t, page); len(p.Missing) == 0 {
		t.Errorf("read_output past what the full spool kept: %s; want the range reported missing", resultText(page))
	}
	s.promptly(t)
}

func TestServeFaultAuditReadOnly(t *testing.T) {
	testenv.Root(t, "mount, chattr")
	testenv.Command(t, "chattr", "e2fsprogs")
	s := startServed(t, "signal")
	s.promptly(t) // the audit log exists now
	auditFile := filepath.Join(s.state, "audit.jsonl")
	if out, err := exec.Command("chattr", "+i", auditFile).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s (filesystem without immutable files)", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", auditFile).Run() })
	before, _ := os.ReadFile(auditFile)

	marker := filepath.Join("/tmp", "actiongw-audit-"+randomHex(t, 6))
	t.Cleanup(func() { os.Remove(marker) })
	res := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "touch " + marker})
	if !res.IsError || !strings.Contains(resultText(res), "the action did not run") {
		t.Errorf("action with an unwritable audit log: %s; want it refused", resultText(res))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the refused command ran anyway")
	}
	if after, _ := os.ReadFile(auditFile); string(after) != string(before) {
		t.Errorf("the audit log changed under a failed write")
	}

	if out, err := exec.Command("chattr", "-i", auditFile).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	s.promptly(t)
	if _, err := audit.Verify(auditFile); err != nil {
		t.Errorf("audit chain after the fault: %v", err)
	}
}
