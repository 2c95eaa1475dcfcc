//go:build linux

package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/testkit/browsertest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// startConsole runs `actiongw console` in-process on s's config, state
// directory and keyring until cleanup, and returns its login URL.
func startConsole(t *testing.T, s *served) string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var stdout, stderr syncbuf.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, []string{"console", "-config", s.cfgPath}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v\n%s", err, &stderr)
		}
	})
	login := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/login\?token=[A-Z0-9]+`)
	testenv.WaitFor(t, time.Minute, "the console's login URL", func() bool { return login.MatchString(stdout.String()) })
	return login.FindString(stdout.String())
}

func TestConsoleRefusesNonLoopback(t *testing.T) {
	s := startServed(t, "signal")
	var stdout, stderr syncbuf.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	err := c.run(context.Background(), []string{"console", "-config", s.cfgPath, "-listen", "0.0.0.0:0"})
	var uerr *usageError
	if !errors.As(err, &uerr) || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("console -listen 0.0.0.0:0: %v; want a usage error that says it is not loopback", err)
	}
	if strings.Contains(stdout.String(), "token=") {
		t.Errorf("a refused console printed a login URL: %s", &stdout)
	}
}

// TestConsoleEndToEnd: real serves, the real feed, the real console, a
// real browser. A command's output appears in the page, markup in it
// shows as text, Stop stops it with remote_stopped, the audit view shows
// the records verified; and no response of the whole session holds any
// form of a secret.
func TestConsoleEndToEnd(t *testing.T) {
	b := browsertest.Start(t)
	s := startServed(t, "signal")
	loginURL := startConsole(t, s)

	// What the agent does before and while the person watches: the token
	// comes back redacted, from the target and from the API.
	s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "printf 'secret %s\\n' " + s.token})
	s.call(t, "http_request", map[string]any{"target": "api", "method": "GET", "path": "/echo"})

	tab := b.Tab(t)
	browsertest.Do(t, tab, "login", chromedp.Navigate(loginURL))
	browsertest.WaitText(t, tab, "#conn", "live")
	browsertest.WaitText(t, tab, "#serves", "pid ")
	browsertest.WaitText(t, tab, "#actions td.what", "printf")

	// The token, from a command the page watches to its end (what could
	// begin a secret is held back until the stream ends).
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "wait_s": 0, "command": `sleep 1; printf 'the token: %s\n' ` + s.token})
	handle := decode[struct{ Handle string }](t, r).Handle
	browsertest.Do(t, tab, "select", chromedp.Click(chromedp.CSS(`tr[data-handle="`+handle+`"] td.what`)))
	browsertest.WaitText(t, tab, "#output-streams pre", "the token: [REDACTED:api-token]")

	r = s.call(t, "ssh_exec", map[string]any{"target": "box", "wait_s": 0,
		"command": `for i in 1 2 3; do echo tick$i; sleep 0.2; done; printf '<img src=x onerror=alert(1)>\033[31m\342\200\256gnp.exe\n'; sleep 600`})
	handle = decode[struct{ Handle string }](t, r).Handle
	browsertest.WaitText(t, tab, `tr[data-handle="`+handle+`"] td.status`, "running")
	browsertest.Do(t, tab, "select", chromedp.Click(chromedp.CSS(`tr[data-handle="`+handle+`"] td.what`)))
	out := browsertest.WaitText(t, tab, "#output-streams pre", "gnp.exe")
	for _, want := range []string{"tick1", "tick3", "<img src=x onerror=alert(1)>", "␛[31m", `\u202E`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output shows %q; want %q", out, want)
		}
	}
	browsertest.Do(t, tab, "stop", chromedp.Click(chromedp.CSS(`tr[data-handle="`+handle+`"] button.stop`)))
	browsertest.WaitText(t, tab, `tr[data-handle="`+handle+`"] td.status`, "remote_stopped: true")

	browsertest.Do(t, tab, "audit", chromedp.Click(chromedp.CSS(`button[data-view="audit"]`)))
	browsertest.WaitText(t, tab, "#chain .state", "verified")
	browsertest.WaitText(t, tab, "#audit-table td.status", "remote_stopped: true")
	if x := browsertest.Eval[string](t, tab, `typeof window.__xss`); x != "undefined" || len(b.Dialogs()) > 0 || len(b.Exceptions()) > 0 {
		t.Errorf("script ran or failed: __xss %s, dialogs %q, exceptions %q", x, b.Dialogs(), b.Exceptions())
	}

	// Every response of the session, fetched by the page, then searched
	// for every form of every secret.
	cookies, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if cookies != "" {
		t.Errorf("the page's script can read cookies %q; the session cookie must be HttpOnly", cookies)
	}
	var seen strings.Builder
	collect := func(tabPath string) {
		body, err := chromedp.Run(tab, chromedp.Evaluate[string](`fetch(`+browsertest.JSString(tabPath)+`).then(r => r.text())`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("fetch %s: %v", tabPath, err)
		}
		seen.WriteString(body)
	}
	for _, p := range []string{"/", "/app.js", "/app.css", "/api/session", "/api/audit", "/api/audit?limit=100000", "/api/audit.jsonl", "/api/verify"} {
		collect(p)
	}
	// The event stream's first snapshot, as the page got it.
	snapshot, err := chromedp.Run(tab, chromedp.Evaluate[string](`new Promise(ok => { const es = new EventSource("/api/events"); es.addEventListener("snapshot", m => { es.close(); ok(m.data); }); })`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	seen.WriteString(snapshot)
	// And what the page shows.
	html, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	seen.WriteString(html)
	if !strings.Contains(seen.String(), "[REDACTED:api-token]") {
		t.Fatalf("the session holds no redaction marker: the search below would prove nothing")
	}
	unbroken := strings.NewReplacer("\r", "", "\n", "", `\r`, "", `\n`, "")
	for name, secret := range map[string][]byte{"api-token": []byte(s.token), "box-key": s.sshd.ClientKey} {
		for _, f := range redact.Forms(secret) {
			if strings.Contains(seen.String(), f) || strings.Contains(unbroken.Replace(seen.String()), unbroken.Replace(f)) {
				t.Errorf("a console response holds a form of %s (%.12q…)", name, f)
			}
		}
	}
}
