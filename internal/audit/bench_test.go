package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkAppend is many goroutines appending to one log at once, as the
// actions of a busy server do: the figure is records/s, each on disk
// before Append returns.
func BenchmarkAppend(b *testing.B) {
	for _, key := range [][]byte{nil, testKey} {
		b.Run(fmt.Sprintf("keyed=%v", key != nil), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "audit.jsonl")
			a, err := OpenWith(context.Background(), path, Options{Key: key, Redact: func(s string) string { return s }})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			b.SetParallelism(8)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := a.Append(&Record{Kind: "intent", Handle: "h", Tool: "ssh_exec", Target: "web1", Command: "uptime"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkVerify is reading a keyed log through, as OpenWith does at
// every start and `audit verify` does: the figure is MB/s.
func BenchmarkVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.jsonl")
	a, err := OpenWith(context.Background(), path, Options{Key: testKey})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { appendN(b, a, 320) })
	}
	wg.Wait()
	a.Close()
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for b.Loop() {
		if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
			b.Fatal(err)
		}
	}
}
