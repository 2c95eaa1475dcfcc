//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// sessionTarget is a target on the served sshd that allows sessions.
const sessionTarget = `[ssh.term]
host = "127.0.0.1"
port = @PORT@
user = "@USER@"
key_secret = "box-key"
known_hosts = "@KNOWN_HOSTS@"
allow_sessions = true
`

// BenchmarkMCPSessionKeystroke is a keystroke's round trip in a terminal
// session through MCP (echo x, Enter, wait_for x on the screen) against
// a warm `ssh_exec true` in the same run, alternating (target: the
// session's p50 at most twice ssh_exec's).
func BenchmarkMCPSessionKeystroke(b *testing.B) {
	s := startServedWith(b, servedOptions{tables: sessionTarget})
	s.call(b, "ssh_exec", map[string]any{"target": "box", "command": "true"}) // warm
	start := decode[gateway.SSHSessionOutput](b, s.call(b, "ssh_session_start", map[string]any{"target": "term", "command": "bash --norc --noprofile"}))
	defer s.call(b, "cancel_action", map[string]any{"handle": start.Handle})
	var keys, exec latencies
	i := 0
	for b.Loop() {
		i++
		mark := fmt.Sprintf("k%d", i)
		t0 := time.Now()
		out := decode[gateway.SSHSessionOutput](b, s.call(b, "ssh_session_send", map[string]any{"handle": start.Handle,
			"text": "echo " + mark, "keys": []string{"Enter"}, "wait_for": "(?m)^" + mark + "$"}))
		keys = append(keys, time.Since(t0))
		if out.Matched == nil || !*out.Matched {
			b.Fatalf("the screen never showed %s: %v", mark, out.Screen.Rows)
		}
		t0 = time.Now()
		s.call(b, "ssh_exec", map[string]any{"target": "box", "command": "true"})
		exec = append(exec, time.Since(t0))
	}
	keys.report(b, "keystroke-")
	exec.report(b, "ssh_exec-")
	b.ReportMetric(float64(p50(keys))/float64(p50(exec)), "ratio")
}

func p50(l latencies) time.Duration { return l[len(l)/2] } // sorted by report

// BenchmarkMCPSessionFlood drains 100 MB through a terminal session
// while nobody sends, against ssh_exec draining as much in the same run,
// and reports both rates, their ratio (target >= 0.5) and serve's peak
// RSS (target <= 64 MiB), and OpenSSH's own client draining as much
// through a pseudo-terminal (ssh -tt), the ceiling a terminal sets:
// pty-ratio is the session against it.
func BenchmarkMCPSessionFlood(b *testing.B) {
	const size = 100_000_000
	s := startServedWith(b, servedOptions{tables: sessionTarget})
	command := fmt.Sprintf("yes %s | head -c %d", strings.Repeat("x", 99), size)
	key := filepath.Join(b.TempDir(), "id")
	if err := os.WriteFile(key, s.sshd.ClientKey, 0o600); err != nil {
		b.Fatal(err)
	}
	var ours, theirs, bare time.Duration
	stop := profileServe(b, s)
	for b.Loop() {
		t0 := time.Now()
		r := s.call(b, "ssh_exec", map[string]any{"target": "box", "command": command, "timeout_s": 600})
		if out := decode[gateway.SSHExecOutput](b, r); out.Stdout.Bytes < size {
			b.Fatalf("ssh_exec drained %d bytes", out.Stdout.Bytes)
		}
		theirs += time.Since(t0)
		start := decode[gateway.SSHSessionOutput](b, s.call(b, "ssh_session_start", map[string]any{"target": "term", "command": "bash --norc --noprofile"}))
		t0 = time.Now()
		out := decode[gateway.SSHSessionOutput](b, s.call(b, "ssh_session_send", map[string]any{"handle": start.Handle,
			"text": command + "; echo; echo flood-done", "keys": []string{"Enter"}, "wait_for": "(?m)^flood-done$", "wait_s": 600}))
		ours += time.Since(t0)
		if out.Matched == nil || !*out.Matched {
			b.Fatalf("the flood's end never showed: %v", out.Screen.Rows)
		}
		s.call(b, "cancel_action", map[string]any{"handle": start.Handle})
		t0 = time.Now()
		ssh := exec.Command("ssh", "-tt", "-i", key, "-o", "UserKnownHostsFile="+s.sshd.KnownHosts, "-o", "BatchMode=yes",
			"-p", strconv.Itoa(s.sshd.Port), s.sshd.User+"@127.0.0.1", command)
		if err := ssh.Run(); err != nil { // stdout is /dev/null
			b.Fatalf("ssh -tt: %v", err)
		}
		bare += time.Since(t0)
	}
	stop()
	mbps := func(d time.Duration) float64 { return float64(b.N) * size / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(ours), "session-MB/s")
	b.ReportMetric(mbps(theirs), "ssh_exec-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
	b.ReportMetric(mbps(bare), "openssh-tt-MB/s")
	b.ReportMetric(bare.Seconds()/ours.Seconds(), "pty-ratio")
	if rss, err := proc.Memory(s.client.Pid(), "VmHWM"); err == nil {
		b.ReportMetric(float64(rss)/(1<<20), "serve-peak-MiB")
	}
	b.ReportMetric(0, "ns/op")
}
