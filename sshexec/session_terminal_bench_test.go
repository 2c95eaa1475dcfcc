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
