package auditexport

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/internal/audit"
)

// discard is a receiver that reads and drops everything, as fast as
// loopback goes.
func discard(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { io.Copy(io.Discard, c); c.Close() })
		}
	})
	b.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// unreachable is an address nothing listens on.
func unreachable(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	l.Close()
	return l.Addr().String()
}

func benchExporter(b *testing.B, addr string) *Exporter {
	e, err := New(Config{Addr: addr, QueueBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// What is queued is of no interest: not flushed.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e.Close(ctx)
	})
	return e
}

// BenchmarkAuditAppend is what an action waits for to write a record
// (8 goroutines appending at once, each record on disk before Append
// returns) without an export, with one connected to a receiver, and with
// one whose receiver is down (the queue full, every record dropped):
// the export must cost the action nothing it would notice.
func BenchmarkAuditAppend(b *testing.B) {
	for _, bc := range []struct {
		name string
		addr func(*testing.B) string
	}{{"export=none", nil}, {"export=connected", discard}, {"export=down", unreachable}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := audit.Options{Key: audit.NewKey()}
			var e *Exporter
			if bc.addr != nil {
				e = benchExporter(b, bc.addr(b))
				opts.Written = e.Send
			}
			a, err := audit.OpenWith(context.Background(), filepath.Join(b.TempDir(), "audit.jsonl"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := a.Append(&audit.Record{Kind: audit.KindIntent, Handle: "h", Tool: "ssh_exec", Target: "web1", Command: "uptime", Decision: "allow"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if e != nil {
				st := e.Stats()
				b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
			}
		})
	}
}

// BenchmarkSend is Send alone, one record of 400 bytes: queued (the
// queue emptied every 4096 records, outside the timer, so that each
// Send copies its line in), and dropped (the queue full). The Exporter's
// receiver is down, so that its goroutine takes nothing from the queue
// meanwhile.
func BenchmarkSend(b *testing.B) {
	for _, full := range []bool{false, true} {
		b.Run(map[bool]string{false: "queued", true: "dropped"}[full], func(b *testing.B) {
			e := benchExporter(b, unreachable(b))
			l := line(1, 400)
			empty := func() {
				e.mu.Lock()
				clear(e.queue)
				e.queue, e.qbytes = e.queue[:0], 0
				e.mu.Unlock()
			}
			if full {
				for e.Stats().Dropped == 0 {
					e.Send(l)
				}
			}
			b.SetBytes(int64(len(l)))
			n := 0
			for b.Loop() {
				if n++; !full && n%4096 == 0 {
					b.StopTimer()
					empty()
					b.StartTimer()
				}
				e.Send(l)
			}
			if st := e.Stats(); full != (st.Dropped >= int64(b.N)) {
				b.Fatalf("stats %+v after %d sends", st, b.N)
			}
		})
	}
}

// BenchmarkFrame is the goroutine's work per record: a record line framed
// with its fields as structured data; the figure is MB/s of lines.
func BenchmarkFrame(b *testing.B) {
	l := auditLines(b, nil, &audit.Record{Kind: audit.KindOutcome, Handle: "act_0123456789", Tool: "ssh_exec", Target: "web1",
		Status: "exited", ExitCode: exitCode(0), DurationMS: 1234,
		Streams: map[string]audit.Stream{"stdout": {Bytes: 1 << 20, SHA256: "ab"}, "stderr": {Bytes: 0, SHA256: "cd"}}})[1]
	enc := newEncoder("gw.example", 1)
	var buf []byte
	b.SetBytes(int64(len(l)))
	for b.Loop() {
		buf = enc.frame(buf[:0], l, false)
	}
}
