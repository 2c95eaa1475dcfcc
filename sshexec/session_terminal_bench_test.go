package sshexec

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// BenchmarkTerminalDrain is what a pseudo-terminal session drains with
// nothing behind it (io.Discard): the ceiling the gateway's session
// flood is held against, set by the server's terminal, not by sshexec.
func BenchmarkTerminalDrain(b *testing.B) {
	const size = 100_000_000
	s := sshtest.Start(b, sshtest.Options{})
	s.RequirePTY(b)
	p := NewPool(nil)
	defer p.Close()
	tg := target(s)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		l, err := p.Acquire(ctx, tg, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		term, err := l.StartTerminal(ctx, TerminalRequest{Command: "head -c 100000000 /dev/zero | tr '\\0' x | fold -w 100", Output: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		res, err := term.Wait()
		cancel()
		if err != nil || res.StdoutBytes < size {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	b.SetBytes(size)
}

// BenchmarkTerminalStart is a whole terminal session of `true` on a warm
// connection (the terminal, the watcher, which the program waits for,
// the stop that verifies it gone) against a Run of `true` in the same
// run: what a session costs beyond a command.
func BenchmarkTerminalStart(b *testing.B) {
	s := sshtest.Start(b, sshtest.Options{})
	s.RequirePTY(b)
	p := NewPool(nil)
	defer p.Close()
	tg := target(s)
	ctx := context.Background()
	var session, command time.Duration
	for b.Loop() {
		start := time.Now()
		l, err := p.Acquire(ctx, tg, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		term, err := l.StartTerminal(ctx, TerminalRequest{Command: "true", Output: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := term.Wait(); err != nil || res.Status != StatusExited {
			b.Fatalf("%+v, %v", res, err)
		}
		session += time.Since(start)
		start = time.Now()
		if res, err := p.Run(ctx, tg, Request{Command: "true", Stdout: io.Discard, Stderr: io.Discard}); err != nil || res.Status != StatusExited {
			b.Fatalf("%+v, %v", res, err)
		}
		command += time.Since(start)
	}
	b.ReportMetric(float64(session.Microseconds())/float64(b.N)/1000, "session-ms")
	b.ReportMetric(float64(command.Microseconds())/float64(b.N)/1000, "run-ms")
	b.ReportMetric(float64(session)/float64(command), "x-run")
}
