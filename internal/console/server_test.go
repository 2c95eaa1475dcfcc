package console

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/feed"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"", true},
		{"127.0.0.2:0", true},
		{"0.0.0.0:0", false},
		{"[::]:0", false},
		{":0", false},
		{"192.168.1.10:0", false},
		{"localhost:0", false},
		{"example.com:80", false},
		{"[fe80::1%lo]:0", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			s, err := Listen(Options{Listen: tc.addr, Watcher: newFake()})
			if s != nil {
				s.ln.Close()
			}
			var nl *NotLoopbackError
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Listen(%q): %v; want it to listen", tc.addr, err)
			case !tc.ok && !errors.As(err, &nl):
				t.Fatalf("Listen(%q): %v; want a *NotLoopbackError", tc.addr, err)
			}
		})
	}
}

func TestLoginTokenWorksOnce(t *testing.T) {
	s := startConsole(t, newFake(), t.TempDir())
	c := newClient(t, s)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest("GET", s.LoginURL(), nil)
	resp, _ := c.do(t, req)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d to %q; want 303 to / (no token in the address)", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies; want 1", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Value == "" || strings.Contains(ck.Value, loginQuery(s).Get("token")) {
		t.Errorf("session cookie %+v; want HttpOnly, SameSite=Strict, Path=/, not the token", ck)
	}
	if code, _ := c.get(t, "/api/session"); code != http.StatusOK {
		t.Errorf("with the session: %d; want 200", code)
	}
	// A second browser, the same link: refused; so is a wrong token.
	for _, u := range []string{s.LoginURL(), "/login?token=" + strings.Repeat("A", 26), "/login"} {
		other := newClient(t, s)
		if code, _ := other.get(t, u); code != http.StatusUnauthorized {
			t.Errorf("login at %s by another browser: %d; want 401", strings.Split(u, "?")[0], code)
		}
		if code, _ := other.get(t, "/api/session"); code != http.StatusUnauthorized {
			t.Errorf("another browser after a refused login: %d; want 401", code)
		}
	}
	// The browser with the session is sent on.
	if resp, _ := c.do(t, req); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login again with the session: %d; want 303", resp.StatusCode)
	}
}

// TestRequestChecks: every request needs the session; the Host must be
// the listen address; an Origin or a browser's Sec-Fetch-Site must be the
// console's own; every POST needs the CSRF token.
func TestRequestChecks(t *testing.T) {
	f := newFake()
	s := startConsole(t, f, t.TempDir())
	in := newClient(t, s)
	in.login(t)
	out := newClient(t, s)
	own := "http://" + s.Addr()
	_, port, _ := net.SplitHostPort(s.Addr())
	for _, tc := range []struct {
		name         string
		method, path string
		session      bool
		header       map[string]string
		host         string
		want         int
	}{
		{name: "page without session", method: "GET", path: "/", want: 401},
		{name: "script without session", method: "GET", path: "/app.js", want: 401},
		{name: "events without session", method: "GET", path: "/api/events", want: 401},
		{name: "audit without session", method: "GET", path: "/api/audit", want: 401},
		{name: "session without session", method: "GET", path: "/api/session", want: 401},
		{name: "stop without session", method: "POST", path: "/api/stop", want: 401},
		{name: "page", method: "GET", path: "/", session: true, want: 200},
		{name: "script", method: "GET", path: "/app.js", session: true, want: 200},
		{name: "foreign host", method: "GET", path: "/", session: true, host: "attacker.example:" + port, want: 403},
		{name: "localhost host", method: "GET", path: "/", session: true, host: "localhost:" + port, want: 403},
		{name: "host without port", method: "GET", path: "/", session: true, host: "127.0.0.1", want: 403},
		{name: "foreign host at login", method: "GET", path: "/login?token=x", host: "rebound.example:" + port, want: 403},
		{name: "foreign origin", method: "GET", path: "/api/session", session: true, header: map[string]string{"Origin": "http://attacker.example"}, want: 403},
		{name: "other port origin", method: "GET", path: "/api/session", session: true, header: map[string]string{"Origin": "http://127.0.0.1:1"}, want: 403},
		{name: "null origin", method: "GET", path: "/api/session", session: true, header: map[string]string{"Origin": "null"}, want: 403},
		{name: "own origin", method: "GET", path: "/api/session", session: true, header: map[string]string{"Origin": own}, want: 200},
		{name: "same-site fetch", method: "GET", path: "/api/session", session: true, header: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "cross-site fetch", method: "GET", path: "/api/session", session: true, header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "stop without CSRF", method: "POST", path: "/api/stop", session: true, header: map[string]string{"Origin": own}, want: 403},
		{name: "answer without CSRF", method: "POST", path: "/api/answer", session: true, want: 403},
		{name: "stop with a wrong CSRF", method: "POST", path: "/api/stop", session: true, header: map[string]string{csrfHeader: "wrong"}, want: 403},
		{name: "stop with CSRF in the query", method: "POST", path: "/api/stop?csrf=" + in.csrf, session: true, want: 403},
		{name: "stop with CSRF", method: "POST", path: "/api/stop", session: true, header: map[string]string{csrfHeader: in.csrf}, want: 200},
		{name: "answer with CSRF", method: "POST", path: "/api/answer", session: true, header: map[string]string{csrfHeader: in.csrf}, want: 200},
		{name: "PUT without CSRF", method: "PUT", path: "/api/stop", session: true, want: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"serve":"s1","handle":"h1"}`
			if strings.HasPrefix(tc.path, "/api/answer") {
				body = `{"serve":"s1","question":"q1","answer":"approve"}`
			}
			req, _ := http.NewRequest(tc.method, "http://"+s.Addr()+tc.path, strings.NewReader(body))
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			c := out
			if tc.session {
				c = in
			}
			stops, answers := f.recorded()
			resp, got := c.do(t, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: %d %q; want %d", tc.method, tc.path, resp.StatusCode, got, tc.want)
			}
			if tc.want != 200 {
				if s2, a2 := f.recorded(); len(s2) != len(stops) || len(a2) != len(answers) {
					t.Errorf("a refused request reached the watcher: stops %q, answers %q", s2, a2)
				}
			}
		})
	}
}

// TestSecurityHeadersOnEveryResponse: refused, missing, static and API
// responses all carry the CSP and nosniff.
func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	s := startConsole(t, newFake(), t.TempDir())
	in := newClient(t, s)
	in.login(t)
	out := newClient(t, s)
	_, port, _ := net.SplitHostPort(s.Addr())
	for _, tc := range []struct {
		c    *client
		path string
		host string
	}{
		{in, "/", ""}, {in, "/app.js", ""}, {in, "/app.css", ""}, {in, "/favicon.svg", ""}, {in, "/nothing", ""},
		{in, "/api/session", ""}, {in, "/api/audit", ""}, {in, "/api/verify", ""}, {in, "/api/audit.jsonl", ""},
		{out, "/", ""}, {out, "/login?token=wrong", ""}, {in, "/", "evil.example:" + port},
	} {
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+tc.path, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, _ := tc.c.do(t, req)
		h := resp.Header
		if got := h.Get("Content-Security-Policy"); got != contentSecurityPolicy {
			t.Errorf("%s (%d): Content-Security-Policy %q; want %q", tc.path, resp.StatusCode, got, contentSecurityPolicy)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s (%d): nosniff %q, frame %q, referrer %q", tc.path, resp.StatusCode, h.Get("X-Content-Type-Options"), h.Get("X-Frame-Options"), h.Get("Referrer-Policy"))
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(contentSecurityPolicy, want+";") && !strings.HasSuffix(contentSecurityPolicy, want) {
			t.Errorf("the CSP lacks %s", want)
		}
	}
	if strings.Contains(contentSecurityPolicy, "unsafe") || strings.Contains(contentSecurityPolicy, "http") {
		t.Errorf("the CSP allows unsafe sources or another origin: %s", contentSecurityPolicy)
	}
}

// TestAssetsAreInert: the page's markup has no inline script, handler
// attribute or style, names no other origin, and its script never parses
// a string as markup or code.
func TestAssetsAreInert(t *testing.T) {
	for _, tc := range []struct {
		file  string
		deny  []string
		allow []string // external-looking strings that are no origin
	}{
		{"index.html", []string{`<script>`, ` on[a-z]+=`, ` style=`, `javascript:`, `://`}, nil},
		{"app.css", []string{`@import`, `url\(`, `://`}, nil},
		{"app.js", []string{`innerHTML`, `outerHTML`, `insertAdjacentHTML`, `document\.write`, `eval\(`, `new Function`, `setAttribute\("(style|on)`, `\.html\(`, `://`},
			[]string{"http://www.w3.org/2000/svg"}},
		{"favicon.svg", []string{`<script`, ` on[a-z]+=`, `href=`}, []string{"http://www.w3.org/2000/svg"}},
	} {
		b, err := fs.ReadFile(assets, "assets/"+tc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, a := range tc.allow {
			text = strings.ReplaceAll(text, a, "")
		}
		for _, d := range tc.deny {
			if m := regexp.MustCompile(d).FindString(text); m != "" {
				t.Errorf("%s holds %q", tc.file, m)
			}
		}
	}
	entries, _ := fs.ReadDir(assets, "assets")
	if len(entries) != 4 {
		t.Errorf("assets holds %d files; the test checks 4", len(entries))
	}
}

func TestStopAndAnswerReachTheWatcher(t *testing.T) {
	f := newFake()
	s := startConsole(t, f, t.TempDir())
	c := newClient(t, s)
	c.login(t)
	for _, tc := range []struct {
		path, body string
		want       int
		answerErr  error
	}{
		{"/api/stop", `{"serve":"s1","handle":"ssh-1"}`, 200, nil},
		{"/api/answer", `{"serve":"s1","question":"q1","answer":"approve"}`, 200, nil},
		{"/api/answer", `{"serve":"s1","question":"q2","answer":"approve_for"}`, 200, nil},
		{"/api/answer", `{"serve":"s2","question":"q3","answer":"decline"}`, 200, nil},
		{"/api/answer", `{"serve":"s2","question":"q4","answer":"decline"}`, 409, errGone},
		{"/api/answer", `{"serve":"s1","question":"q5","answer":"approve_forever"}`, 400, nil},
		{"/api/answer", `{"serve":"s1","question":"q6","answer":"approve","extra":1}`, 400, nil},
		{"/api/stop", strings.Repeat(" ", maxPostBytes+1) + `{}`, 400, nil},
	} {
		f.mu.Lock()
		f.answerErr = tc.answerErr
		f.mu.Unlock()
		if code, body := c.post(t, tc.path, tc.body); code != tc.want {
			t.Errorf("POST %s %.60s: %d %s; want %d", tc.path, tc.body, code, body, tc.want)
		}
	}
	stops, answers := f.recorded()
	if fmt.Sprint(stops) != "[s1/ssh-1]" || fmt.Sprint(answers) != "[s1/q1/approve s1/q2/approve_for s2/q3/decline s2/q4/decline]" {
		t.Errorf("the watcher got stops %q, answers %q", stops, answers)
	}
}

// sseReader reads server-sent events.
type sseReader struct{ r *bufio.Reader }

func (s sseReader) next() (name, data string, err error) {
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data, nil
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

// TestEventStream: a snapshot first, then the events in order.
func TestEventStream(t *testing.T) {
	f := newFake()
	f.setSnapshot(feed.Snapshot{Actions: []feed.Action{{Serve: "s1", Handle: "ssh-1", Status: "running"}}})
	s := startConsole(t, f, t.TempDir())
	c := newClient(t, s)
	c.login(t)
	resp, err := c.Get(c.url("/api/events"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := sseReader{bufio.NewReader(resp.Body)}
	name, data, err := r.next()
	if err != nil || name != "snapshot" || !strings.Contains(data, `"handle":"ssh-1"`) || !strings.Contains(data, `"questions":[]`) {
		t.Fatalf("first event %q %s (%v); want the snapshot", name, data, err)
	}
	for i := range 3 {
		f.events <- feed.Event{Output: &feed.Output{Serve: "s1", Handle: "ssh-1", Stream: "stdout", Offset: int64(i), Data: "x"}}
	}
	for i := range 3 {
		name, data, err := r.next()
		if err != nil || name != "feed" || !strings.Contains(data, fmt.Sprintf(`"offset":%d`, i)) {
			t.Fatalf("event %d: %q %s (%v)", i, name, data, err)
		}
	}
	// The feed lost events: the page is told, and gets a fresh snapshot.
	f.setSnapshot(feed.Snapshot{Actions: []feed.Action{{Serve: "s1", Handle: "ssh-2", Status: "running"}}})
	f.events <- feed.Event{Missed: 7}
	if name, data, err := r.next(); err != nil || name != "missed" || data != `{"missed":7}` {
		t.Fatalf("after the feed missed events: %q %s (%v); want missed 7", name, data, err)
	}
	if name, data, err := r.next(); err != nil || name != "snapshot" || !strings.Contains(data, "ssh-2") {
		t.Fatalf("after missed: %q %s (%v); want a fresh snapshot", name, data, err)
	}
}

// TestEventStreamBounded: a tab that stops reading is never buffered
// for: its queue stays at subQueue, it is told what it missed, and a
// stream whose writes stall is dropped.
func TestEventStreamBounded(t *testing.T) {
	f := newFake()
	s := startConsole(t, f, t.TempDir())
	s.writeTimeout = 2 * time.Second
	c := newClient(t, s)
	c.login(t)
	// A raw connection that asks for the stream and never reads.
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetReadBuffer(4 << 10)
	}
	cookie := c.Jar.Cookies(mustURL(c.url("/")))[0]
	fmt.Fprintf(conn, "GET /api/events HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\n\r\n", s.Addr(), cookie.Name, cookie.Value)
	waitFor(t, "the stream to subscribe", func() bool { return s.hub.subscribers() == 1 })
	var sb *sub
	s.hub.mu.Lock()
	for x := range s.hub.subs {
		sb = x
	}
	s.hub.mu.Unlock()
	big := strings.Repeat("y", 32<<10)
	// Far more than the socket buffers and the queue hold.
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; s.hub.subscribers() == 1; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stream is still open after %d events of 32 KiB it did not read", i)
		}
		f.events <- feed.Event{Output: &feed.Output{Serve: "s1", Handle: "h", Stream: "stdout", Offset: int64(i) * int64(len(big)), Data: big}}
		if n := len(sb.ch); n > subQueue {
			t.Fatalf("the queue holds %d events; bound %d", n, subQueue)
		}
		if i%100 == 99 {
			time.Sleep(10 * time.Millisecond) // the stream's write deadline is what ends it
		}
	}
	if sb.missed.Load() == 0 && len(sb.lost) == 0 {
		t.Errorf("the stream was dropped without missing an event")
	}
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

// waitFor is testenv.WaitFor with the console tests' deadline.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, what, ok)
}
