package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// queueWatch is a slog handler that closes queued when a call starts
// waiting for a slot: the event a test waits on.
type queueWatch struct {
	slog.Handler
	queued chan struct{}
}

func (h *queueWatch) Enabled(context.Context, slog.Level) bool { return true }

func (h *queueWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "waiting for a slot" {
		select {
		case <-h.queued:
		default:
			close(h.queued)
		}
	}
	return nil
}

// TestQueuedCallMeetsReload: a call that waits for its target's slot
// while a reload denies its command is refused when the slot frees, and
// nothing runs: it was decided under rules no longer in effect. A reload
// that changed nothing (a file saved as it was) refuses nothing.
func TestQueuedCallMeetsReload(t *testing.T) {
	f := newFixture(t)
	toml := strings.Replace(f.toml, `queue_wait = "300ms"`, `queue_wait = "120s"`, 1)
	for _, tc := range []struct {
		name   string
		reload string
		runs   bool
	}{
		{"denies it", strings.Replace(toml, `max_concurrent = 1`, "max_concurrent = 1\ndeny_commands = [\"touch\"]", 1), false},
		{"changes nothing", toml, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.toml = toml
			watch := &queueWatch{Handler: slog.DiscardHandler, queued: make(chan struct{})}
			gw := New(context.Background(), Options{Config: f.reparse(t, ""), Secrets: f.store, Logger: slog.New(watch)})
			t.Cleanup(func() { gw.Close() })
			ctx := context.Background()

			zero := 0.0
			r := gw.SSHExec(ctx, SSHExecInput{Target: "single", Command: "sleep 300", WaitS: &zero}, nil)
			busy, ok := r.Structured.(*SSHExecOutput)
			if r.IsError || !ok || busy.Status != StatusRunning {
				t.Fatalf("the call that holds the slot: %s", r.Text)
			}
			marker := filepath.Join(t.TempDir(), "ran")
			second := make(chan *ToolResult, 1)
			go func() { second <- gw.SSHExec(ctx, SSHExecInput{Target: "single", Command: "touch " + marker}, nil) }()
			select {
			case <-watch.queued:
			case <-time.After(60 * time.Second):
				t.Fatal("the second call did not queue for the slot within 60 s")
			}
			f.toml = tc.reload
			if err := gw.Reload(ctx, f.reparse(t, ""), nil); err != nil {
				t.Fatal(err)
			}
			if r := gw.CancelAction(ctx, CancelActionInput{Handle: busy.Handle}); !strings.Contains(r.Text, "cancelled") {
				t.Fatalf("cancel_action: %s", r.Text)
			}
			r = <-second
			_, err := os.Stat(marker)
			switch {
			case tc.runs && (r.IsError || err != nil):
				t.Errorf("the queued call after a reload that changed nothing: %q (marker: %v); want it run", r.Text, err)
			case !tc.runs && (!r.IsError || !strings.Contains(r.Text, "reloaded while this call waited")):
				t.Errorf("the queued call after a reload that denies it: %q; want it refused", r.Text)
			case !tc.runs && err == nil:
				t.Errorf("the queued command ran under the rules the reload replaced")
			}
		})
	}
}

// TestQueuedRememberedCallMeetsReload: a call that an approve_for
// remembered (no person saw it) and that waits for its endpoint's slot
// while a reload denies its method is refused like any other: the reload
// ends what a remembered answer covers (its key names the state).
func TestQueuedRememberedCallMeetsReload(t *testing.T) {
	f := newFixture(t)
	f.toml = strings.Replace(f.toml, `queue_wait = "300ms"`, `queue_wait = "120s"`, 1)
	var released atomic.Int32
	hold := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-hold
			return
		}
		released.Add(1)
	}))
	t.Cleanup(api.Close)
	t.Cleanup(func() { close(hold) })
	endpoint := func(methods string) string {
		return fmt.Sprintf("[http.deploy]\nbase_url = %q\nmethods = %s\napprove_methods = %[2]s\nmax_concurrent = 1\nallow_private = true\n[approval]\nremember = \"10m\"\n", api.URL, methods)
	}
	watch := &queueWatch{Handler: slog.DiscardHandler, queued: make(chan struct{})}
	gw := New(context.Background(), Options{Config: f.reparse(t, endpoint(`["POST"]`)), Secrets: f.store, Logger: slog.New(watch)})
	t.Cleanup(func() { gw.Close() })
	ctx := WithApprover(context.Background(), approverFunc(func(context.Context, *Question) (Answer, time.Duration, error) {
		return AnswerApproveFor, time.Hour, nil
	}))
	release := HTTPRequestInput{Endpoint: "deploy", Method: "POST", Path: "/release"}
	if r := gw.HTTPRequest(ctx, release, nil); r.IsError || released.Load() != 1 {
		t.Fatalf("the first, approved, request: %s", r.Text)
	}
	zero := 0.0
	r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "deploy", Method: "POST", Path: "/hold", WaitS: &zero}, nil)
	busy, ok := r.Structured.(*HTTPRequestOutput)
	if r.IsError || !ok || busy.Status != StatusRunning {
		t.Fatalf("the call that holds the slot: %s", r.Text)
	}
	nobody := WithApprover(context.Background(), approverFunc(func(context.Context, *Question) (Answer, time.Duration, error) {
		t.Error("the remembered request was asked about")
		return AnswerDecline, 0, nil
	}))
	second := make(chan *ToolResult, 1)
	go func() { second <- gw.HTTPRequest(nobody, release, nil) }()
	select {
	case <-watch.queued:
	case <-time.After(60 * time.Second):
		t.Fatal("the second call did not queue for the slot within 60 s")
	}
	if err := gw.Reload(context.Background(), f.reparse(t, endpoint(`["GET"]`)), nil); err != nil {
		t.Fatal(err)
	}
	if r := gw.CancelAction(context.Background(), CancelActionInput{Handle: busy.Handle}); !strings.Contains(r.Text, "cancelled") {
		t.Fatalf("cancel_action: %s", r.Text)
	}
	if r := <-second; !r.IsError || released.Load() != 1 {
		t.Errorf("the queued remembered POST after a reload that allows only GET: %q, sent %d times; want it refused, sent once", r.Text, released.Load())
	}
}

// TestCancelledCallDoesNotStart: a call whose client cancelled it before
// it took its slots does not start, even with every slot free: it is
// audited as a call that did not start, and nothing is sent.
func TestCancelledCallDoesNotStart(t *testing.T) {
	f := newFixture(t)
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(api.Close)
	gw := New(context.Background(), Options{Config: f.reparse(t, fmt.Sprintf("[http.plain]\nbase_url = %q\nallow_private = true\n", api.URL)), Secrets: f.store})
	t.Cleanup(func() { gw.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "plain", Method: "GET", Path: "/x"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "did not start") || hits.Load() != 0 {
		t.Errorf("a call cancelled before it started: %q, %d requests sent; want it not started, none sent", r.Text, hits.Load())
	}
}
