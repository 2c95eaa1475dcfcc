package httpact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// scripted answers the n-th request (from 1) with steps[n-1], repeating the
// last step, and records each request body and the gaps between answering
// one request and receiving the next.
type scripted struct {
	steps []func(w http.ResponseWriter)
	n     atomic.Int32
	mu    sync.Mutex
	body  []string
	// gaps[i] runs from the end of the handler of request i+1 to the
	// arrival of request i+2. A client cannot send the next request
	// before it has the answer, which leaves after the handler returns,
	// so a gap is longer than any wait between the two.
	gaps     []time.Duration
	answered time.Time
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	n := int(s.n.Add(1))
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.body = append(s.body, string(b))
	if n > 1 {
		s.gaps = append(s.gaps, arrived.Sub(s.answered))
	}
	s.mu.Unlock()
	s.steps[min(n, len(s.steps))-1](w)
	fmt.Fprintf(w, "attempt %d", n)
	s.mu.Lock()
	s.answered = time.Now()
	s.mu.Unlock()
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

// TestRetries checks which answers are retried, how often, that the last
// answer comes back, and that a Retry-After is waited out (the gap the
// server saw, a lower bound the client's wait enforces) or, past the
// deadline, not waited for at all (one attempt, and its answer rather than
// a timeout).
func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		req          Request
		retry        RetryPolicy
		steps        []func(http.ResponseWriter)
		wantAttempts int
		wantStatus   int
		minGap       time.Duration // the least wait the client must have made between attempts
		deadline     time.Duration // of the request's context; 0: none
	}{
		{"GET 503 with Retry-After", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(503, "Retry-After", "1"), status(200)}, 2, 200, time.Second, 0},
		{"GET 503 to the end returns the last response", Request{Method: "GET"}, RetryPolicy{MaxAttempts: 3},
			[]func(http.ResponseWriter){status(503)}, 3, 503, 0, 0},
		{"GET 429", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(429), status(200)}, 2, 200, 0, 0},
		{"GET 501 not retried", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(501), status(200)}, 1, 501, 0, 0},
		{"GET 404 not retried", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(404), status(200)}, 1, 404, 0, 0},
		{"POST 503 not retried", Request{Method: "POST", Body: []byte("x")}, RetryPolicy{},
			[]func(http.ResponseWriter){status(503), status(200)}, 1, 503, 0, 0},
		{"POST with Idempotency-Key retried", Request{Method: "POST", Body: []byte("x"), Headers: map[string]string{"Idempotency-Key": "k1"}}, RetryPolicy{},
			[]func(http.ResponseWriter){status(503), status(200)}, 2, 200, 0, 0},
		{"PUT body replayed", Request{Method: "PUT", Body: []byte(`{"a":1}`), JSON: true}, RetryPolicy{},
			[]func(http.ResponseWriter){status(502), status(500), status(201)}, 3, 201, 0, 0},
		{"retries disabled", Request{Method: "GET"}, RetryPolicy{MaxAttempts: 1},
			[]func(http.ResponseWriter){status(503), status(200)}, 1, 503, 0, 0},
		// Uncapped, the hour would pass the deadline and the 503 come
		// back after one attempt.
		{"Retry-After capped", Request{Method: "GET"}, RetryPolicy{RetryAfterMax: 50 * time.Millisecond},
			[]func(http.ResponseWriter){status(503, "Retry-After", "3600"), status(200)}, 2, 200, 50 * time.Millisecond, time.Minute},
		{"Retry-After date", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(429, "Retry-After", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)), status(200)}, 2, 200, 0, 0},
		// Waiting would end in a timeout; the 503 is the answer.
		{"Retry-After past the deadline returns the answer", Request{Method: "GET"}, RetryPolicy{},
			[]func(http.ResponseWriter){status(503, "Retry-After", "20"), status(200)}, 1, 503, 0, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{steps: tt.steps}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c, logs := newTestClient(t)
			e := testEndpoint(srv, bearer())
			e.Retry = tt.retry
			if e.Retry.MaxAttempts == 0 {
				e.Retry.MaxAttempts = 3 // the configured default
			}
			e.Retry.WaitMin, e.Retry.WaitMax = time.Millisecond, 5*time.Millisecond
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			var body bytes.Buffer
			res, err := c.Do(ctx, e, tt.req, &body)
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != tt.wantAttempts || int(s.n.Load()) != tt.wantAttempts || res.HTTPStatus != tt.wantStatus {
				t.Errorf("attempts %d (server saw %d), status %d (%s); want %d attempts, status %d",
					res.Attempts, s.n.Load(), res.HTTPStatus, res.Reason, tt.wantAttempts, tt.wantStatus)
			}
			if want := fmt.Sprintf("attempt %d", tt.wantAttempts); body.String() != want {
				t.Errorf("body %q; want the last response %q", body.String(), want)
			}
			for i, gap := range s.gaps {
				if gap < tt.minGap {
					t.Errorf("attempt %d came %v after the answer to attempt %d; want at least %v", i+2, gap, i+1, tt.minGap)
				}
			}
			for i, b := range s.body {
				if b != string(tt.req.Body) {
					t.Errorf("attempt %d sent body %q; want %q", i+1, b, tt.req.Body)
				}
			}
			checkNoSecret(t, logs, res)
		})
	}
}

func TestRetryConnectionError(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no response at all
		}
	}))
	defer srv.Close()
	for _, tt := range []struct {
		method string
		want   int
	}{{"GET", 3}, {"POST", 1}} {
		t.Run(tt.method, func(t *testing.T) {
			hits.Store(0)
			c, logs := newTestClient(t)
			e := testEndpoint(srv, Auth{Kind: AuthQuery, Param: "api_key", Token: []byte(testToken)})
			res, err := c.Do(context.Background(), e, Request{Method: tt.method, Path: "/x", Query: map[string][]string{"page": {"2"}}}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusFailed || res.Attempts != tt.want || int(hits.Load()) != tt.want {
				t.Errorf("%s after %d attempts (server saw %d): %s; want failed after %d", res.Status, res.Attempts, hits.Load(), res.Reason, tt.want)
			}
			if !strings.Contains(res.Reason, "/api/x") {
				t.Errorf("reason %q does not name the path", res.Reason)
			}
			checkNoSecret(t, logs, res)
		})
	}
}

// signalWriter reports its first write and counts bytes.
type signalWriter struct {
	once  sync.Once
	first chan struct{}
	n     atomic.Int64
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	w.once.Do(func() { close(w.first) })
	return len(p), nil
}

// TestCancel cancels a request at an event the test sees: while it waits
// for headers (the server has it), while it reads the body (the first bytes
// were written) and while it waits between retries (the 503 was read to
// the end, which comes after the decision to retry and before the wait).
// Each must end as cancelled with the cause, and a second request must then
// complete. Nothing else ends these requests early: the server holds until
// the client hangs up, the retry wait is 20 s and the timeout a minute, so
// a cancel not acted on shows as a timeout or a second attempt.
func TestCancel(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	hold := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/headers", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		hold(w, r)
	})
	mux.HandleFunc("/api/body", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 4096))
		http.NewResponseController(w).Flush()
		hold(w, r)
	})
	mux.HandleFunc("/api/backoff", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(503)
		// A body, so the connection goes idle only when the client has
		// read it, after deciding to retry.
		io.WriteString(w, "busy")
	})
	mux.HandleFunc("/api/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for handlers
	c, logs := newTestClient(t)
	e := testEndpoint(srv, bearer())
	e.Retry.RetryAfterMax = time.Minute

	tests := []struct {
		path      string
		trigger   func(w *signalWriter, idle <-chan struct{}) <-chan struct{}
		wantBytes bool
	}{
		{"/headers", func(*signalWriter, <-chan struct{}) <-chan struct{} { return arrived }, false},
		{"/body", func(w *signalWriter, _ <-chan struct{}) <-chan struct{} { return w.first }, true},
		{"/backoff", func(_ *signalWriter, idle <-chan struct{}) <-chan struct{} { return idle }, false},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			idle := make(chan struct{})
			var idleOnce sync.Once
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				PutIdleConn: func(err error) {
					if err == nil {
						idleOnce.Do(func() { close(idle) })
					}
				},
			})
			ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
			defer cancelTimeout()
			ctx, cancel := context.WithCancelCause(ctx)
			w := &signalWriter{first: make(chan struct{})}
			trig := tt.trigger(w, idle)
			done := make(chan struct{})
			go func() {
				defer close(done)
				<-trig
				cancel(errors.New("stopped by the user"))
			}()
			res, err := c.Do(ctx, e, Request{Method: "GET", Path: tt.path}, w)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusCancelled || res.Reason != "stopped by the user" {
				t.Errorf("got %s %q; want cancelled with the cause", res.Status, res.Reason)
			}
			if tt.wantBytes && (res.BodyBytes < 4096 || res.HTTPStatus != 200) {
				t.Errorf("body bytes %d, status %d; want the 4096 bytes read before the cancel", res.BodyBytes, res.HTTPStatus)
			}
			if tt.path == "/backoff" && res.Attempts != 1 {
				t.Errorf("attempts %d; want 1", res.Attempts)
			}

			var body bytes.Buffer
			res, err = c.Do(context.Background(), e, Request{Method: "GET", Path: "/ok"}, &body)
			if err != nil || res.Status != StatusOK || body.String() != "ok" {
				t.Errorf("second request: %+v, %v, %q; want ok", res, err, body.String())
			}
		})
	}
	checkNoSecret(t, logs, nil)
}

func TestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	e := testEndpoint(srv, bearer())

	// A deadline with a cause (the gateway gives the action's): the
	// cause is the reason.
	ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errors.New("request timed out after 300ms"))
	defer cancel()
	res, err := c.Do(ctx, e, Request{Method: "GET"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusTimeout || res.Reason != "request timed out after 300ms" {
		t.Errorf("got %s %q; want a timeout after 300ms", res.Status, res.Reason)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err = c.Do(ctx, e, Request{Method: "GET"}, io.Discard)
	if err != nil || res.Status != StatusTimeout {
		t.Errorf("caller deadline: %+v, %v; want timeout", res, err)
	}
}

func TestBodyLimit(t *testing.T) {
	var finished sync.WaitGroup
	var wrote atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		finished.Add(1)
		defer finished.Done()
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		chunk := bytes.Repeat([]byte("y"), 32<<10)
		var sent int64
		for sent < n {
			m, err := w.Write(chunk[:min(int64(len(chunk)), n-sent)])
			sent += int64(m)
			if err != nil {
				break
			}
		}
		wrote.Store(sent)
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	const limit = 100 << 10
	tests := []struct {
		name   string
		n      int64
		status Status
		bytes  int64
	}{
		{"under", limit - 1, StatusOK, limit - 1},
		{"exactly", limit, StatusOK, limit},
		{"one over", limit + 1, StatusBodyLimit, limit},
		{"far over is abandoned", 1 << 30, StatusBodyLimit, limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEndpoint(srv, bearer())
			e.MaxResponseBody = limit
			var w signalWriter
			w.first = make(chan struct{})
			res, err := c.Do(context.Background(), e, Request{Method: "GET", Query: map[string][]string{"n": {fmt.Sprint(tt.n)}}}, &w)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || res.BodyBytes != tt.bytes || w.n.Load() != tt.bytes || res.BodyCut != (tt.status == StatusBodyLimit) {
				t.Errorf("got %s, %d bytes (writer %d), cut %v; want %s, %d bytes", res.Status, res.BodyBytes, w.n.Load(), res.BodyCut, tt.status, tt.bytes)
			}
			if want := fmt.Sprintf(`the response body is longer than %d bytes, the most endpoint "test" reads; `+
				`%d bytes were read and the rest was not (the request was abandoned); to read more, raise drain_cap in [http.test]`,
				limit, limit); tt.status == StatusBodyLimit && res.Reason != want {
				t.Errorf("reason %q; want %q", res.Reason, want)
			}
			if tt.n == 1<<30 {
				finished.Wait() // the handler stops once its writes fail
				if sent := wrote.Load(); sent >= tt.n {
					t.Errorf("server sent all %d bytes; want the request abandoned", sent)
				}
			}
		})
	}
}

// TestLargeBodyBoundedMemory streams 1 GiB through Do and checks that the
// process's peak RSS grows by far less.
func TestLargeBodyBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB transfer skipped in -short")
	}
	const size = 1 << 30
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		chunk := bytes.Repeat([]byte("z"), 256<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	e := testEndpoint(srv, bearer())
	e.MaxResponseBody = 2 << 30

	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset peak RSS: %v", err)
	}
	before := peakRSS(t)
	var w signalWriter
	w.first = make(chan struct{})
	res, err := c.Do(context.Background(), e, Request{Method: "GET"}, &w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOK || res.BodyBytes != size || res.BodyCut {
		t.Fatalf("got %s, %d bytes, cut %v (%s); want ok with 1 GiB", res.Status, res.BodyBytes, res.BodyCut, res.Reason)
	}
	growth := peakRSS(t) - before
	t.Logf("1 GiB in %v, peak RSS growth %d KiB", res.Duration, growth>>10)
	if growth > 64<<20 {
		t.Errorf("peak RSS grew by %d MiB; want under 64 MiB", growth>>20)
	}
}

// peakRSS reads VmHWM from /proc/self/status, in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	n, err := proc.Memory(0, "VmHWM")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Skipf("no /proc: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	return n
}

func TestResponseHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Request-Id", "req-1")
		h.Set("Set-Cookie", "session="+testToken)
		h.Add("X-RateLimit-Remaining", "41")
		h.Add("Etag", `"v1"`)
		h.Add("Etag", `"v2"`)
		io.WriteString(w, r.Header.Get("Content-Type")+"|"+r.Header.Get("User-Agent"))
	}))
	defer srv.Close()
	c, _ := newTestClient(t)
	e := testEndpoint(srv, bearer())

	var body bytes.Buffer
	res, err := c.Do(context.Background(), e, Request{Method: "POST", Body: []byte(`{"a":1}`), JSON: true}, &body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"content-type": "application/json", "content-length": fmt.Sprint(body.Len()), "x-request-id": "req-1", "etag": `"v1", "v2"`}
	if fmt.Sprint(res.Headers) != fmt.Sprint(want) {
		t.Errorf("headers %v; want %v", res.Headers, want)
	}
	if body.String() != "application/json|actiongw" {
		t.Errorf("server saw content type and agent %q; want application/json|actiongw", body.String())
	}

	e.ResponseHeaders = []string{"X-RateLimit-*"}
	res, err = c.Do(context.Background(), e, Request{Method: "GET", Headers: map[string]string{"Content-Type": "text/plain", "User-Agent": "agent/1"}}, &body)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"x-ratelimit-remaining": "41"}; fmt.Sprint(res.Headers) != fmt.Sprint(want) {
		t.Errorf("headers %v; want %v", res.Headers, want)
	}
}
