//go:build unix

package sshexec

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// BenchmarkDrain compares draining 1 GiB through sshexec with the OpenSSH
// client (`ssh host 'head -c …' > /dev/null`) against the same sshd,
// alternating the two in each iteration so that both see the same machine
// load. It reports each one's MB/s and their ratio, and each client's CPU
// seconds per GB with their ratio: on a shared machine the wall-time ratio
// follows the load, the CPU cost much less.
func BenchmarkDrain(b *testing.B) {
	size := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("SSHEXEC_DRAIN_BYTES"), 10, 64); err == nil && v > 0 {
		size = v // a smaller size for profiling
	}
	s := sshtest.Start(b, sshtest.Options{})
	command := fmt.Sprintf("head -c %d /dev/zero", size)
	p := NewPool(nil)
	defer p.Close()
	tg := target(s)
	key := filepath.Join(b.TempDir(), "id")
	if err := os.WriteFile(key, s.ClientKey, 0o600); err != nil {
		b.Fatal(err)
	}
	var ours, theirs, oursCPU, theirsCPU time.Duration
	for b.Loop() {
		start, cpu := time.Now(), processCPU(b)
		res, err := p.Run(context.Background(), tg, Request{Command: command, Stdout: io.Discard})
		if err != nil || res.StdoutBytes != size {
			b.Fatalf("got %+v, %v", res, err)
		}
		ours += time.Since(start)
		oursCPU += processCPU(b) - cpu

		cmd := exec.Command("ssh", "-F", "/dev/null", "-i", key, "-p", strconv.Itoa(s.Port),
			"-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+s.KnownHosts,
			"-o", "HostKeyAlgorithms=ssh-ed25519", s.User+"@"+s.Host, command)
		var stderr strings.Builder
		cmd.Stderr = &stderr // Stdout nil is /dev/null
		start = time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("ssh: %v: %s", err, stderr.String())
		}
		theirs += time.Since(start)
		theirsCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	n := float64(b.N) * float64(size) / 1e6
	b.ReportMetric(n/ours.Seconds(), "sshexec-MB/s")
	b.ReportMetric(n/theirs.Seconds(), "openssh-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
	b.ReportMetric(oursCPU.Seconds()*1e3/n, "sshexec-cpu-s/GB")
	b.ReportMetric(theirsCPU.Seconds()*1e3/n, "openssh-cpu-s/GB")
	b.ReportMetric(theirsCPU.Seconds()/oursCPU.Seconds(), "cpu-ratio")
}

// processCPU is the user plus system CPU time this process has used: the
// pool's goroutines and x/crypto's, and the Go runtime's (GC) on their
// behalf.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRoundTrip runs `true` on a warm connection and reports the
// median and 95th percentile. In each iteration it also runs `true` in a
// bare x/crypto session on the same connection (raw-): the server's own
// cost of a session, which sshexec cannot go below; and through sshexec
// on a target whose wrapper does not use the host's perl (nosub-), which
// tells what the subreaper supervisor costs of the difference.
func BenchmarkRoundTrip(b *testing.B) {
	s := sshtest.Start(b, sshtest.Options{})
	p := NewPool(nil)
	defer p.Close()
	tg := target(s)
	noSub := target(s)
	noSub.noSubreaper = true
	for _, t := range []*Target{tg, noSub} {
		if _, err := p.Run(context.Background(), t, Request{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	c, err := p.conn(context.Background(), tg)
	if err != nil {
		b.Fatal(err)
	}
	var d, raw, nosub []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := p.Run(context.Background(), tg, Request{Command: "true"})
		if err != nil || res.Status != StatusExited {
			b.Fatalf("got %+v, %v", res, err)
		}
		d = append(d, time.Since(start))

		start = time.Now()
		sess, err := c.client.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := sess.Run("true"); err != nil {
			b.Fatal(err)
		}
		sess.Close()
		raw = append(raw, time.Since(start))

		start = time.Now()
		if res, err := p.Run(context.Background(), noSub, Request{Command: "true"}); err != nil || res.Status != StatusExited {
			b.Fatalf("without the supervisor: got %+v, %v", res, err)
		}
		nosub = append(nosub, time.Since(start))
	}
	reportPercentiles(b, "", d)
	reportPercentiles(b, "raw-", raw)
	reportPercentiles(b, "nosub-", nosub)
}

// BenchmarkCancel measures from cancelling a running `sleep` to its
// process being gone on the target, for both stop paths.
func BenchmarkCancel(b *testing.B) {
	s := sshtest.Start(b, sshtest.Options{})
	for _, mode := range []StopMode{StopSignal, StopWrapper} {
		b.Run(string(mode), func(b *testing.B) {
			p := NewPool(nil)
			defer p.Close()
			tg := target(s)
			tg.StopMode = mode
			dir := s.UserDir(b)
			var d []time.Duration
			for i := 0; b.Loop(); i++ {
				pidFile := filepath.Join(dir, strconv.Itoa(i))
				ctx, cancel := context.WithCancelCause(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := p.Run(ctx, tg, Request{Command: fmt.Sprintf("echo $$ > %s; sleep 1000", pidFile)})
					done <- err
				}()
				pid := sshtest.ReadPID(b, pidFile, 10*time.Second)
				start := time.Now()
				cancel(errTestCancel)
				if !sshtest.WaitGone(pid, 10*time.Second) {
					b.Fatalf("process %d still runs", pid)
				}
				d = append(d, time.Since(start))
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			reportPercentiles(b, "", d)
		})
	}
}

func reportPercentiles(b *testing.B, prefix string, d []time.Duration) {
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.5), prefix+"p50-ms")
	b.ReportMetric(at(0.95), prefix+"p95-ms")
}
