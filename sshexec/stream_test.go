package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// countWriter counts bytes and checks that they are all zero.
type countWriter struct {
	n       atomic.Int64
	nonZero atomic.Bool
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	if len(bytes.Trim(p, "\x00")) > 0 {
		w.nonZero.Store(true)
	}
	return len(p), nil
}

// TestDrainLarge drains 1 GiB from stdout while stderr gets a little: the
// streams stay separate and memory stays bounded.
func TestDrainLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB transfer")
	}
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	const size = 1 << 30
	var stdout countWriter
	var stderr syncbuf.Buffer
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if rss := rssBytes(); rss > peak.Load() {
				peak.Store(rss)
			}
		}
	}()
	before := rssBytes()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := p.Run(ctx, target(s), Request{
		Command: fmt.Sprintf("echo start >&2; head -c %d /dev/zero; echo end >&2", size),
		Stdout:  &stdout,
		Stderr:  &stderr,
	})
	close(stopSampling)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusExited || *res.ExitCode != 0 {
		t.Errorf("got %+v; want exited 0", res)
	}
	if got := stdout.n.Load(); got != size || res.StdoutBytes != size {
		t.Errorf("stdout bytes: got %d (result %d); want %d", got, res.StdoutBytes, size)
	}
	if stdout.nonZero.Load() {
		t.Error("stdout has bytes that are not zero: streams mixed")
	}
	if got := stderr.String(); got != "start\nend\n" {
		t.Errorf("stderr: got %q; want start and end", got)
	}
	const bound = 64 << 20
	if grow := int64(peak.Load()) - int64(before); grow > bound {
		t.Errorf("RSS grew by %d MiB while draining; want under %d MiB", grow>>20, bound>>20)
	}
	t.Logf("1 GiB in %v (%.0f MB/s), peak RSS %d MiB", res.Duration,
		float64(size)/res.Duration.Seconds()/1e6, peak.Load()>>20)
}

func rssBytes() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

func TestOutputLimit(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	dir := s.UserDir(t)
	var stdout, stderr syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.Run(ctx, target(s), Request{
		Command:     fmt.Sprintf("echo $$ > %s/pid; echo abc >&2; exec yes", dir),
		OutputLimit: 1000,
		Stdout:      &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOutputLimit || res.RemoteStopped == nil || !*res.RemoteStopped {
		t.Errorf("got %+v; want output_limit, remote stopped", res)
	}
	if got := len(stdout.String()) + len(stderr.String()); got != 1000 {
		t.Errorf("bytes written: got %d; want exactly the limit, 1000", got)
	}
	if res.StdoutBytes+res.StderrBytes < 1000 {
		t.Errorf("bytes received: got %d; want at least the limit", res.StdoutBytes+res.StderrBytes)
	}
	if pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), time.Second); !sshtest.WaitGone(pid, 2*time.Second) {
		t.Errorf("process %d still runs", pid)
	}
}

func TestStdinAndTimeout(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	ctx := context.Background()

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB, more than a window
	var stdout syncbuf.Buffer
	res, err := p.Run(ctx, tg, Request{Command: "wc -c; cat >/dev/null", Stdin: big, Stdout: &stdout})
	if err != nil || res.Status != StatusExited || strings.TrimSpace(stdout.String()) != strconv.Itoa(len(big)) {
		t.Errorf("stdin: got %+v, %q, %v; want wc to count %d bytes", res, stdout.String(), err, len(big))
	}

	// A command that does not read its stdin still ends.
	res, err = p.Run(ctx, tg, Request{Command: "true", Stdin: big})
	if err != nil || res.Status != StatusExited {
		t.Errorf("unread stdin: got %+v, %v; want exited", res, err)
	}

	// A deadline is a timeout, with its cause as the reason: the
	// context's own, or one that wraps context.DeadlineExceeded (the
	// gateway's).
	gateways := fmt.Errorf("timed out after 200ms: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, func())
		want string
	}{
		{"context deadline", func() (context.Context, func()) {
			ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			return ctx, cancel
		}, context.DeadlineExceeded.Error()},
		{"deadline with a cause", func() (context.Context, func()) {
			ctx, cancel := context.WithTimeoutCause(ctx, 200*time.Millisecond, errors.New("timed out after 200ms"))
			return ctx, cancel
		}, "timed out after 200ms"},
		{"cancelled with a deadline's cause", func() (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			timer := time.AfterFunc(200*time.Millisecond, func() { cancel(gateways) })
			return ctx, func() { timer.Stop(); cancel(nil) }
		}, gateways.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			res, err := p.Run(ctx, tg, Request{Command: "sleep 1000"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusTimeout || res.Reason != tc.want {
				t.Errorf("got %+v; want status timeout, reason %q", res, tc.want)
			}
			if res.RemoteStopped == nil || !*res.RemoteStopped {
				t.Errorf("remote stopped: got %v; want true", res.RemoteStopped)
			}
		})
	}
}

// TestWriterError keeps draining after a writer fails and reports the
// error with the result.
func TestWriterError(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	res, err := p.Run(context.Background(), target(s), Request{
		Command: "head -c 10000000 /dev/zero; exit 4",
		Stdout:  failingWriter{},
	})
	if err == nil || !strings.Contains(err.Error(), "write stdout") {
		t.Errorf("error: got %v; want the write error", err)
	}
	if res == nil || res.Status != StatusExited || *res.ExitCode != 4 || res.StdoutBytes != 10000000 {
		t.Errorf("got %+v; want exited 4 after draining 10000000 bytes", res)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestPTY(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	s.RequirePTY(t)
	p := newPool(t)
	tg := target(s)
	tg.UsePTY = true
	tg.StopMode = StopWrapper
	out, err := runCmd(t, p, tg, "tty >/dev/null && echo tty; echo err >&2")
	if err != nil || out.res.Status != StatusExited {
		t.Fatalf("got %+v, %v", out, err)
	}
	if out.stdout != "tty\r\nerr\r\n" || out.stderr != "" {
		t.Errorf("got stdout %q, stderr %q; want both lines on stdout, with CRLF", out.stdout, out.stderr)
	}
}
