package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/internal/payload"
	"github.com/actiongw/actiongw/mcpserver/internal/wire"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// testContext bounds a test's calls. It builds the binary first, so that
// the build's time is not the test's.
func testContext(t *testing.T) context.Context {
	binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// errorSink collects the server's null-id errors.
type errorSink chan *jsonrpc.Error

func (s errorSink) next(t *testing.T) *jsonrpc.Error {
	t.Helper()
	select {
	case e := <-s:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no error response from the server")
		return nil
	}
}

func withErrors() (errorSink, mcphost.Options) {
	sink := make(errorSink, 16)
	return sink, mcphost.Options{OnError: func(e *jsonrpc.Error) { sink <- e }}
}

func ping(t *testing.T, ctx context.Context, s *server) {
	t.Helper()
	if _, err := s.Call(ctx, "ping", nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func health(t *testing.T, ctx context.Context, s *server) wire.Snapshot {
	t.Helper()
	res, err := s.CallTool(ctx, "health", map[string]any{}, nil)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	var h mcpserver.Health
	if err := json.Unmarshal(mustJSON(t, res.StructuredContent), &h); err != nil {
		t.Fatalf("decoding health: %v", err)
	}
	return h.Transport
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pingFrame is a ping call with id that is exactly size bytes long.
func pingFrame(t *testing.T, id int64, size int) []byte {
	t.Helper()
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":"`, id)
	tail := `"}}}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("frame size %d too small", size)
	}
	return []byte(head + strings.Repeat("x", pad) + tail)
}

func TestWireLimit(t *testing.T) {
	const limit = 64 << 10
	ctx := testContext(t)
	errs, opts := withErrors()
	s := startServer(t, ctx, limit, opts)
	tests := []struct {
		name     string
		size     int
		accepted bool
	}{
		{"well under", 1000, true},
		{"one under", limit - 1, true},
		{"exactly the limit", limit, true},
		{"one over", limit + 1, false},
		{"far over", 10 * limit, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := int64(1000 + i)
			p, err := s.SendFrame(ctx, id, pingFrame(t, id, tt.size))
			if err != nil {
				t.Fatal(err)
			}
			if tt.accepted {
				if _, err := p.Wait(ctx); err != nil {
					t.Fatalf("frame of %d bytes: got %v; want a pong", tt.size, err)
				}
				return
			}
			// The frame's id is in its first bytes: the call gets its
			// error.
			_, err = p.Wait(ctx)
			var e *jsonrpc.Error
			if !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(e.Message, fmt.Sprint(limit)) || !strings.Contains(e.Message, fmt.Sprint(tt.size)) {
				t.Errorf("got %v; want error -32600 naming the limit %d and the size %d", err, limit, tt.size)
			}
			ping(t, ctx, s) // the session goes on
		})
	}
	select {
	case e := <-errs:
		t.Errorf("got an error with id null: %d %q; want each with its call's id", e.Code, e.Message)
	default:
	}
	m := health(t, ctx, s)
	if m.OversizeFrames != 2 || m.LargestFrameIn != limit {
		t.Errorf("got oversize_frames %d, largest_frame_in %d; want 2 and %d", m.OversizeFrames, m.LargestFrameIn, limit)
	}
}

// TestHugeLineBoundedMemory sends one 50 MiB line under the default 4 MiB
// limit: it is rejected (its call gets the error), the session answers
// ping, and the server never held it (peak RSS stays under 64 MiB).
func TestHugeLineBoundedMemory(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})
	const size = 50 << 20
	line := make([]byte, size)
	copy(line, `{"jsonrpc":"2.0","id":77,"method":"ping","params":{"_meta":{"pad":"`)
	for i := 70; i < size; i++ {
		line[i] = 'x'
	}
	p, err := s.SendFrame(ctx, 77, line)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Wait(ctx)
	if e := (*jsonrpc.Error)(nil); !errors.As(err, &e) || !strings.Contains(e.Message, fmt.Sprint(size)) || !strings.Contains(e.Message, "4194304") {
		t.Errorf("got %v; want an error naming the size %d and the limit 4194304", err, size)
	}
	ping(t, ctx, s)
	if hwm := procStatus(t, s.Pid(), "VmHWM"); hwm >= 64<<20 {
		t.Errorf("server peak RSS %d MiB; want under 64 MiB", hwm>>20)
	} else {
		t.Logf("server peak RSS %.1f MiB after a 50 MiB line", float64(hwm)/(1<<20))
	}
}

// TestBadFrames: frames that are not one JSON-RPC message are answered
// with an error, with the frame's id when it shows one (TestFrameErrorIDs
// has every kind of id), else with id null, and counted.
func TestBadFrames(t *testing.T) {
	ctx := testContext(t)
	errs, opts := withErrors()
	s := startServer(t, ctx, 0, opts)
	tests := []struct {
		name     string
		id       int64 // 0: the frame has no id to read
		frame    string
		wantCode int64
		wantText string
	}{
		{"malformed JSON", 904, `{"jsonrpc":"2.0","id":904,"method":`, jsonrpc.CodeParseError, "not valid JSON"},
		{"garbage", 0, `hello`, jsonrpc.CodeParseError, "not valid JSON"},
		{"batch", 0, `[{"jsonrpc":"2.0","id":900,"method":"ping"},{"jsonrpc":"2.0","id":901,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, "batches are not supported"},
		{"wrong version", 902, `{"jsonrpc":"1.0","id":902,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "invalid request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := s.SendFrame(ctx, tt.id, []byte(tt.frame))
			if err != nil {
				t.Fatal(err)
			}
			var e *jsonrpc.Error
			if tt.id == 0 {
				e = errs.next(t)
			} else if _, err := p.Wait(ctx); !errors.As(err, &e) {
				t.Fatalf("got %v; want the call's error", err)
			}
			if e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("got %d %q; want %d containing %q", e.Code, e.Message, tt.wantCode, tt.wantText)
			}
			ping(t, ctx, s)
		})
	}
	if m := health(t, ctx, s); m.ParseErrors != int64(len(tests)) {
		t.Errorf("got parse_errors %d; want %d", m.ParseErrors, len(tests))
	}
	if got := s.Metrics().ResponsesDropped; got != 0 {
		t.Errorf("host saw %d unexpected responses (a batch member answered?); want 0", got)
	}
}

// TestPayloadRoundTrip sends every payload kind to the server and back
// (as the echo argument) and has the server generate it, both byte-exact.
func TestPayloadRoundTrip(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})
	for _, kind := range payload.Kinds() {
		for _, n := range []int{1, 1000, 300 << 10} {
			want, err := payload.Generate(kind, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{"generated", "echoed"} {
				t.Run(fmt.Sprintf("%s/%d/%s", kind, n, mode), func(t *testing.T) {
					args := map[string]any{"bytes": n, "kind": kind}
					if mode == "echoed" {
						args = map[string]any{"echo": string(want)}
					}
					res, err := s.CallTool(ctx, "emit", args, nil)
					if err != nil {
						t.Fatal(err)
					}
					if res.IsError || len(res.Content) != 1 {
						t.Fatalf("got %+v; want one text block", res)
					}
					got := res.Content[0].(*mcp.TextContent).Text
					if got != string(want) {
						t.Errorf("payload differs: got %d bytes; want %d (first difference at %d)", len(got), len(want), firstDiff(got, string(want)))
					}
				})
			}
		}
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestBlockedHost stops reading the server's stdout while a large result is
// being written, then cancels another running call, starts a new one and
// pings. The server must act on all of it while its write is stuck; once
// reading resumes, the ping is answered and the cancelled call never is.
func TestBlockedHost(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})
	needBacklog(t, s)

	slow, err := s.StartTool(ctx, "emit", map[string]any{"bytes": 1000, "chunks": 600, "delay_ms": 50, "tag": "slow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the slow call to start", func() bool { return s.logged("emit started", `"tag":"slow"`) })

	s.PauseReading()
	const bigSize = 8 << 20
	big, err := s.StartTool(ctx, "emit", map[string]any{"bytes": bigSize, "kind": "multibyte", "tag": "big"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the server's stdout pipe to fill", func() bool {
		unread, capacity, err := s.StdoutBacklog()
		return err == nil && unread == capacity
	})
	// From here until ResumeReading the server's write of the big result
	// cannot make progress: the test holds it blocked for at least this long.
	fullAt := time.Now()

	// While stdout is stuck: cancel, a new call, a ping.
	if err := s.Cancel(slow.ID(), "test: cancel while stdout is blocked"); err != nil {
		t.Fatal(err)
	}
	fresh, err := s.StartTool(ctx, "emit", map[string]any{"bytes": 10, "tag": "fresh"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pong, err := s.Send(ctx, "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the cancel to stop the slow call", func() bool { return s.logged("emit cancelled", `"tag":"slow"`) })
	testenv.WaitFor(t, 10*time.Second, "the new call to run", func() bool { return s.logged("emit finished", `"tag":"fresh"`) })
	// A response already queued behind the stuck write is dropped too when
	// its call is cancelled before the writer reaches it.
	queued, err := s.StartTool(ctx, "emit", map[string]any{"bytes": 10, "tag": "queued"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	queuedID := fmt.Sprintf(`"id":%d`, queued.ID())
	testenv.WaitFor(t, 10*time.Second, "the queued call's response to be queued", func() bool { return s.logged("response queued", queuedID) })
	if err := s.Cancel(queued.ID(), "test: cancel a queued response"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the server to read the cancel", func() bool { return s.logged("cancel received", queuedID) })
	if unread, capacity, _ := s.StdoutBacklog(); unread != capacity {
		t.Fatalf("stdout backlog %d of %d: the test did not keep the server blocked", unread, capacity)
	}

	heldBlocked := time.Since(fullAt)
	s.ResumeReading()
	if _, err := pong.Wait(ctx); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
	bigRes, err := big.WaitTool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := payload.Generate("multibyte", bigSize)
	if got := bigRes.Content[0].(*mcp.TextContent).Text; got != string(want) {
		t.Errorf("big payload differs at byte %d", firstDiff(got, string(want)))
	}
	if _, err := fresh.WaitTool(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the queued response to be dropped by the writer", func() bool {
		return s.logged("dropped the response", queuedID, "in the queue")
	})
	m := health(t, ctx, s)
	if m.CancelsReceived != 2 || m.ResponsesDropped != 2 {
		t.Errorf("server: got cancels_received %d, responses_dropped %d; want 2 and 2", m.CancelsReceived, m.ResponsesDropped)
	}
	if m.StdoutBlockedMS < heldBlocked.Milliseconds() {
		t.Errorf("server: got stdout_blocked_ms %d; want at least the %d ms the test held its write blocked", m.StdoutBlockedMS, heldBlocked.Milliseconds())
	}
	if got := s.Metrics().ResponsesDropped; got != 0 {
		t.Errorf("host received %d responses for no waiting call; want 0 (cancelled calls must not answer)", got)
	}
}

// TestBlockedParent shows the failure the transport guards against: a host
// that never reads leaves the server blocked in write. The project's host,
// with a progress consumer far slower than the server, never does.
func TestBlockedParent(t *testing.T) {
	ctx := testContext(t)
	const size = 4 << 20

	t.Run("host that never reads", func(t *testing.T) {
		s := startServer(t, ctx, 0, mcphost.Options{})
		needBacklog(t, s)
		s.PauseReading() // from now on this host is one that never reads
		if _, err := s.StartTool(ctx, "emit", map[string]any{"bytes": size}, nil); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 20*time.Second, "the server to report a blocked write", func() bool {
			return s.logged("stdout write blocked")
		})
		unread, capacity, err := s.StdoutBacklog()
		if err != nil || unread != capacity {
			t.Fatalf("stdout backlog %d of %d (%v); want a full pipe", unread, capacity, err)
		}
		s.ResumeReading() // so Close can end the session
	})

	t.Run("project host", func(t *testing.T) {
		s := startServer(t, ctx, 0, mcphost.Options{QueueLen: 1})
		// A consumer that takes its first notification and does not
		// return until the result is in: were the host's reader held up by
		// it, the server's stdout would fill and the result never come.
		release := make(chan struct{})
		var once sync.Once
		entered := make(chan struct{})
		progress := func(mcp.ProgressNotificationParams) {
			once.Do(func() { close(entered) })
			<-release
		}
		res, err := s.CallTool(ctx, "emit", map[string]any{"bytes": size, "chunks": 40, "delay_ms": 50}, progress)
		select {
		case <-entered: // normally long before the result
		case <-time.After(30 * time.Second):
			t.Error("the consumer never got a notification")
		}
		close(release)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("emit failed: %+v", res)
		}
		// 40 chunks, one notification in the consumer, one in the queue.
		if got := s.Metrics().DispatchDropped; got == 0 {
			t.Error("got no dropped progress; the blocked consumer should have overflowed the dispatch queue while the reader went on")
		}
		// Close waits for the dispatcher, so no callback runs after it.
		s.Close()
	})
}

// TestCancelMidOutput cancels a call while it produces output with
// progress; a second call on the same session then completes promptly and
// the cancelled one never answers.
func TestCancelMidOutput(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})
	progressed := make(chan struct{}, 100)
	p, err := s.StartTool(ctx, "emit", map[string]any{"bytes": 1 << 20, "chunks": 400, "delay_ms": 50, "tag": "victim"},
		func(mcp.ProgressNotificationParams) { progressed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-progressed:
		case <-ctx.Done():
			t.Fatal("no progress from the running call")
		}
	}
	callCtx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Wait(callCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: got %v; want context.Canceled", err)
	}

	res, err := s.CallTool(ctx, "emit", map[string]any{"bytes": 100, "tag": "next"}, nil)
	if err != nil || res.IsError {
		t.Fatalf("second call: %v %+v", err, res)
	}
	// The victim, left alone, would run 400 × 50 ms: it was stopped, not
	// waited for.
	testenv.WaitFor(t, 10*time.Second, "the cancelled call to stop", func() bool { return s.logged("emit cancelled", `"tag":"victim"`) })
	if s.logged("emit finished", `"tag":"victim"`) {
		t.Error("the cancelled call ran to its end")
	}
	testenv.WaitFor(t, 10*time.Second, "the server to drop the cancelled response", func() bool { return health(t, ctx, s).ResponsesDropped == 1 })
	if got := s.Metrics().ResponsesDropped; got != 0 {
		t.Errorf("host received %d responses for no waiting call; want 0", got)
	}
}

// TestCancelEdgeCases: cancels for unknown ids, for finished calls and an
// id reused after a cancel are all harmless.
func TestCancelEdgeCases(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})

	if err := s.Cancel(424242, "never sent"); err != nil {
		t.Fatal(err)
	}
	ping(t, ctx, s)

	done, err := s.Send(ctx, "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(done.ID(), "after the response"); err != nil {
		t.Fatal(err)
	}
	ping(t, ctx, s)

	// Cancel a slow call sent with our own id, then reuse that id.
	const id = 5000
	slow := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"emit","arguments":{"bytes":10,"chunks":200,"delay_ms":50,"tag":"reused"}}}`, id)
	if _, err := s.SendFrame(ctx, id, []byte(slow)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the slow call to start", func() bool { return s.logged("emit started", `"tag":"reused"`) })
	if err := s.Cancel(id, "test"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the drop", func() bool { return health(t, ctx, s).ResponsesDropped == 1 })
	again, err := s.SendFrame(ctx, id, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Wait(ctx); err != nil {
		t.Fatalf("reused id: %v", err)
	}
	m := health(t, ctx, s)
	if m.CancelsReceived != 3 || m.ResponsesDropped != 1 {
		t.Errorf("got cancels_received %d, responses_dropped %d; want 3 and 1", m.CancelsReceived, m.ResponsesDropped)
	}
}

// TestStrayStdout: a handler printing to os.Stdout reaches stderr, not the
// protocol stream.
func TestStrayStdout(t *testing.T) {
	ctx := testContext(t)
	s := startServer(t, ctx, 0, mcphost.Options{})
	const stray = "STRAY-PRINT {not json\n"
	res, err := s.CallTool(ctx, "emit", map[string]any{"bytes": 10, "stray": stray}, nil)
	if err != nil || res.IsError {
		t.Fatalf("emit: %v %+v", err, res)
	}
	ping(t, ctx, s)
	if got := s.Metrics().ParseErrors; got != 0 {
		t.Errorf("host saw %d unparsable frames; want 0", got)
	}
	if !s.logged("STRAY-PRINT") {
		t.Error("the stray print is not on stderr")
	}
}

// needBacklog ends t with testenv.Missing where the host cannot read its
// stdout pipe's backlog, which the blocked-host tests watch.
func needBacklog(t *testing.T, s *server) {
	t.Helper()
	if _, _, err := s.StdoutBacklog(); errors.Is(err, errors.ErrUnsupported) {
		testenv.Missing(t, "a pipe backlog the host can read", "these tests run on Linux")
	}
}

// TestEmitOnlyInTestBuilds: the release build does not even link the emit
// tool's payload generator.
func TestEmitOnlyInTestBuilds(t *testing.T) {
	const pkg = "github.com/actiongw/actiongw/mcpserver/internal/payload"
	for _, tt := range []struct {
		tags string
		want bool
	}{{"", false}, {"testtools", true}} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tt.tags, "github.com/actiongw/actiongw/cmd/actiongw").Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		if got := slices.Contains(strings.Fields(string(out)), pkg); got != tt.want {
			t.Errorf("tags %q: payload linked = %v; want %v", tt.tags, got, tt.want)
		}
	}
}
