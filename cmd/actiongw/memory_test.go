//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// soakFor is how long BenchmarkServeSoak runs: the ten minutes.
var soakFor = flag.Duration("soak", 10*time.Minute, "how long BenchmarkServeSoak runs")

// heapStats is the result of the heap tool (mcpserver/heap_testtools.go).
type heapStats struct {
	HeapInuse   int64  `json:"heap_inuse"`
	HeapAlloc   int64  `json:"heap_alloc"`
	HeapObjects int64  `json:"heap_objects"`
	NumGC       uint32 `json:"num_gc"`
	Goroutines  int    `json:"goroutines"`
}

// heapOf collects garbage in serve and returns its heap; with profile
// set, serve writes a heap profile there too (go tool pprof -diff_base).
func heapOf(t testing.TB, s *served, profile string) heapStats {
	t.Helper()
	args := map[string]any{}
	if profile != "" {
		args["profile"] = profile
	}
	return decode[heapStats](t, s.call(t, "heap", args))
}

// mixedLoad is the soak's round: an ssh_exec that prints 20,000 lines
// (spooled, previews full), an ssh_exec true, an http_request, and a
// read_output and a search_output of the first: three actions, five
// calls. It runs on goroutines of the test, so it returns its failure.
func mixedLoad(s *served) error {
	call := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := s.client.CallTool(ctx, name, args, nil)
		if err == nil && r.IsError {
			err = errors.New(resultText(r))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return r, nil
	}
	r, err := call("ssh_exec", map[string]any{"target": "box", "command": "seq 1 20000"})
	if err != nil {
		return err
	}
	var out gateway.SSHExecOutput
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.Stdout.Lines != 20000 {
		return fmt.Errorf("ssh_exec seq: %v: %s", err, resultText(r))
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"ssh_exec", map[string]any{"target": "box", "command": "true"}},
		{"http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/echo"}},
		{"read_output", map[string]any{"handle": out.Handle, "stream": "stdout", "offset": 50000, "limit": 4096}},
		{"search_output", map[string]any{"handle": out.Handle, "stream": "stdout", "pattern": "^1999[0-9]$"}},
	} {
		if _, err := call(c.name, c.args); err != nil {
			return err
		}
	}
	return nil
}

// rounds runs n rounds of mixedLoad, workers at a time.
func rounds(t testing.TB, s *served, n, workers int) {
	t.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for err == nil && left.Add(-1) >= 0 {
				err = mixedLoad(s)
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeMemoryFinishedLarge: the registry keeps the last keepFinished
// (356) finished actions, and each kept in memory what it no longer
// needed. Its whole call, by three paths: its kind's input, the action's
// context (the call's values: its approver holds the request), and the
// call's progress function (its context). An inline upload of 5 MiB kept
// its 7 MB frame: 305 MB of heap after 40 of them
// (BenchmarkMCPUploadInline), and an agent could pin some 1.4 GB with
// calls of max_frame_bytes. A fan-out kept the stdin of its targets that
// never ran, and a terminal session its emulator, about 5 MB. Ten rounds
// of an upload, an ssh_exec with stdin, a request with a body and a
// fan-out with stdin to a target that runs and one that does not (each
// of about 1 MB, with a progress token), and a terminal session, must
// leave the heap in use after a collection less than 4 MiB above where
// it was; with any one of those paths open, it grows by 12 MiB or more.
func TestServeMemoryFinishedLarge(t *testing.T) {
	s := startServedWith(t, servedOptions{testtools: true, tables: filesTables + sessionTarget})
	if r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "mkdir " + s.allowed("")}); r.IsError {
		t.Fatal(resultText(r))
	}
	const size = 1 << 20
	raw := make([]byte, size)
	for i := range raw {
		raw[i] = byte(i*7 + i>>9)
	}
	content := base64.StdEncoding.EncodeToString(raw)
	text := strings.Repeat("a line of stdin or of a body\n", size/29)
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := s.client.CallTool(ctx, name, args, func(mcp.ProgressNotificationParams) {})
		if err != nil || r.IsError && name != "cancel_action" && name != "ssh_exec_many" { // a session cancelled, a target that failed
			t.Fatalf("%s: %v %s", name, err, resultText(r))
		}
		return r
	}
	run := func(n int) {
		for range n {
			call("ssh_upload", map[string]any{"target": "files", "path": s.allowed("call.bin"), "content": content, "encoding": "base64", "overwrite": true})
			call("ssh_exec", map[string]any{"target": "box", "command": "wc -c", "stdin": text})
			call("http_request", map[string]any{"endpoint": "api", "method": "POST", "path": "/echo", "body": text})
			// hang's SSH server never answers: its target never runs.
			if out := decode[gateway.SSHExecManyOutput](t, call("ssh_exec_many", map[string]any{"targets": []string{"box", "hang"}, "command": "wc -c", "stdin": text, "timeout_s": 1})); out.Summary.ExitedOK != 1 {
				t.Fatalf("ssh_exec_many on box and hang: %+v; want box's to exit 0", out.Summary)
			}
			start := decode[gateway.SSHSessionOutput](t, call("ssh_session_start", map[string]any{"target": "term", "command": "bash --norc --noprofile"}))
			call("ssh_session_send", map[string]any{"handle": start.Handle, "text": "seq 1 2000; echo done-seq", "keys": []string{"Enter"}, "wait_for": "(?m)^done-seq$"})
			call("cancel_action", map[string]any{"handle": start.Handle}) // returns once it ended
		}
	}
	run(1) // warm: the connection, the spool, the pools
	before := heapOf(t, s, "")
	run(10)
	after := heapOf(t, s, "")
	grew := after.HeapInuse - before.HeapInuse
	t.Logf("heap in use after a collection: %d KiB, then %d KiB after 50 more finished actions", before.HeapInuse>>10, after.HeapInuse>>10)
	if grew > 4<<20 {
		t.Errorf("serve's heap in use grew by %d KiB over 50 finished actions (40 calls of about 1 MB, 10 sessions); want under 4096 KiB: a finished action keeps what it no longer needs", grew>>10)
	}
}

// TestServeMemoryFlat: serve kept about 27 KB in memory for each finished
// action (1000 and 5000 ssh_exec true, heap profiles), the spool's whole
// Action with its captures, and through them the gateway's action and
// result, until spool_ttl. The heap in use after a collection must not
// grow from 2000 to 6000 finished actions by more than a generous 1 KiB
// an action: what a later call needs of them is on disk or in bounded
// caches. Not a timing assertion: the bound is on bytes alone.
func TestServeMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("6000 actions through serve")
	}
	s := startServedWith(t, servedOptions{testtools: true})
	const perRound = 3 // actions
	rounds(t, s, 2000/perRound, 4)
	at2k := heapOf(t, s, "")
	rounds(t, s, 4000/perRound, 4)
	at6k := heapOf(t, s, "")
	grew := at6k.HeapInuse - at2k.HeapInuse
	t.Logf("heap in use after a collection: %d KiB at 2000 actions, %d KiB at 6000 (%d bytes an action); %d and %d goroutines",
		at2k.HeapInuse>>10, at6k.HeapInuse>>10, grew/4000, at2k.Goroutines, at6k.Goroutines)
	const perAction = 1 << 10
	if grew > 4000*perAction {
		t.Errorf("serve's heap in use grew by %d KiB from 2000 to 6000 finished actions (%d bytes each); want at most %d bytes each",
			grew>>10, grew/4000, perAction)
	}
}

// gcLine is a line of GODEBUG=gctrace=1: one collection.
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @`)

// BenchmarkServeSoak runs the mixed load (mixedLoad, four at a time) at
// full speed through one serve for -soak (10 minutes), printing its RSS
// and collections every 10 s, and reports its RSS after the first minute
// and at the end (goal: the end within 1.1x), the collections a second
// (goal: a few), the heap in use after a collection at the end, and the
// actions run.
func BenchmarkServeSoak(b *testing.B) {
	for b.Loop() {
		s := startServedWith(b, servedOptions{testtools: true, env: []string{"GODEBUG=gctrace=1"}})
		pid := s.client.Pid()
		rss := func() float64 {
			v, err := proc.Memory(pid, "VmRSS")
			if err != nil {
				b.Fatal(err)
			}
			return float64(v) / (1 << 20)
		}
		gcs := func() int { return len(gcLine.FindAllStringIndex(s.stderr.String(), -1)) }
		var done atomic.Int64
		stop := make(chan struct{})
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() {
				for {
					select {
					case <-stop:
						errs <- nil
						return
					default:
					}
					if err := mixedLoad(s); err != nil {
						errs <- err
						return
					}
					done.Add(3)
				}
			}()
		}
		start, gcStart := time.Now(), gcs()
		var atMinute float64
		tick := time.NewTicker(10 * time.Second)
		for now := range tick.C {
			at := now.Sub(start)
			r, g := rss(), gcs()-gcStart
			b.Logf("%4.0fs: RSS %.1f MiB, %d actions, %d collections (%.1f/s)", at.Seconds(), r, done.Load(), g, float64(g)/at.Seconds())
			if atMinute == 0 && at >= time.Minute {
				atMinute = r
			}
			if at >= *soakFor {
				break
			}
		}
		tick.Stop()
		close(stop)
		for range cap(errs) {
			if err := <-errs; err != nil {
				b.Error(err)
			}
		}
		end, elapsed, collections := rss(), time.Since(start), gcs()-gcStart
		h := heapOf(b, s, "")
		b.ReportMetric(atMinute, "rss-1min-MiB")
		b.ReportMetric(end, "rss-end-MiB")
		if atMinute > 0 {
			b.ReportMetric(end/atMinute, "rss-end/1min")
		}
		b.ReportMetric(float64(collections)/elapsed.Seconds(), "gc/s")
		b.ReportMetric(float64(h.HeapInuse)/(1<<20), "heap-inuse-end-MiB")
		b.ReportMetric(float64(done.Load()), "actions")
		b.Logf("%d actions in %s", done.Load(), elapsed.Round(time.Second))
		s.client.Close()
	}
	b.ReportMetric(0, "ns/op")
}
