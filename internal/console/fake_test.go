package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/feed"
)

// fakeWatcher is a Watcher the test drives: it sends the events the test
// gives it and records the stops and answers the console asks for.
type fakeWatcher struct {
	events chan feed.Event

	mu        sync.Mutex
	snap      feed.Snapshot
	stops     []string // serve/handle
	answers   []string // serve/question/answer
	stopped   feed.StopResult
	answerErr error
	// onStop and onAnswer, if set, run as a stop or an answer arrives.
	onStop   func(serve, handle string)
	onAnswer func(serve, question string, a feed.Answer)
}

func newFake() *fakeWatcher {
	return &fakeWatcher{events: make(chan feed.Event, 1024),
		stopped: feed.StopResult{Status: "cancelled", RemoteStopped: true, Reason: "stopped from the console"}}
}

func (f *fakeWatcher) Events() <-chan feed.Event { return f.events }

func (f *fakeWatcher) Snapshot() feed.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeWatcher) setSnapshot(s feed.Snapshot) {
	f.mu.Lock()
	f.snap = s
	f.mu.Unlock()
}

func (f *fakeWatcher) Stop(ctx context.Context, serve, handle string) (feed.StopResult, error) {
	f.mu.Lock()
	f.stops = append(f.stops, serve+"/"+handle)
	res, on := f.stopped, f.onStop
	f.mu.Unlock()
	if on != nil {
		on(serve, handle)
	}
	return res, nil
}

func (f *fakeWatcher) Answer(ctx context.Context, serve, question string, a feed.Answer) error {
	f.mu.Lock()
	f.answers = append(f.answers, serve+"/"+question+"/"+string(a))
	err, on := f.answerErr, f.onAnswer
	f.mu.Unlock()
	if err == nil && on != nil {
		on(serve, question, a)
	}
	return err
}

func (f *fakeWatcher) recorded() (stops, answers []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.stops...), append([]string{}, f.answers...)
}

var errGone = errors.New("the question is no longer waiting")

// startConsole starts a console on w (and stateDir) for the test; it is
// stopped, and its goroutines waited for, at cleanup.
func startConsole(t testing.TB, w Watcher, stateDir string) *Server {
	t.Helper()
	return startConsoleWith(t, Options{Watcher: w, StateDir: stateDir})
}

// startConsoleWith starts a console with opts.
func startConsoleWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Serve did not return 30 s after its context ended")
		}
	})
	return s
}

// client is a browser's part for plain HTTP tests: a cookie jar, and the
// CSRF token once logged in.
type client struct {
	*http.Client
	s    *Server
	csrf string
	seen strings.Builder // every response body, for the secret search
}

func newClient(t testing.TB, s *Server) *client {
	jar, _ := cookiejar.New(nil)
	return &client{Client: &http.Client{Jar: jar, Timeout: 30 * time.Second}, s: s}
}

// login opens the login URL and reads the session's CSRF token.
func (c *client) login(t testing.TB) {
	t.Helper()
	if code, body := c.get(t, c.s.LoginURL()); code != http.StatusOK {
		t.Fatalf("login: %d %s", code, body)
	}
	var sess struct{ CSRF string }
	c.getJSON(t, "/api/session", &sess)
	if sess.CSRF == "" {
		t.Fatal("no CSRF token in /api/session")
	}
	c.csrf = sess.CSRF
}

func (c *client) url(path string) string {
	if strings.HasPrefix(path, "http") {
		return path
	}
	return "http://" + c.s.Addr() + path
}

func (c *client) do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.seen.Write(b)
	return resp, string(b)
}

func (c *client) get(t testing.TB, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.url(path), nil)
	resp, body := c.do(t, req)
	return resp.StatusCode, body
}

func (c *client) getJSON(t testing.TB, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.url(path), nil)
	resp, body := c.do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := jsonUnmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

func (c *client) post(t testing.TB, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", c.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, c.csrf)
	req.Header.Set("Origin", "http://"+c.s.Addr())
	resp, b := c.do(t, req)
	return resp.StatusCode, b
}

// loginQuery is the token's query of s's login URL.
func loginQuery(s *Server) url.Values {
	u, _ := url.Parse(s.LoginURL())
	return u.Query()
}
