//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// answerInPage clicks answer on the page's question whose text holds
// what, once it shows, and returns the text the page shows for it.
func answerInPage(t *testing.T, tab context.Context, what, answer string) string {
	t.Helper()
	text := browsertest.WaitText(t, tab, "#questions .qtext", what)
	clicked := browsertest.Eval[bool](t, tab, `(() => {
		const card = [...document.querySelectorAll("#questions .question")].find(c => c.querySelector(".qtext").textContent.includes(`+browsertest.JSString(what)+`));
		const b = card && card.querySelector(`+browsertest.JSString(`button[data-answer="`+answer+`"]`)+`);
		if (!b) return false;
		b.click();
		return true;
	})()`)
	if !clicked {
		t.Fatalf("the question about %q has no %s button", what, answer)
	}
	return text
}

// callInBackground calls tool through call on a goroutine the test waits
// for, and returns where its result arrives (nil: the call failed, which
// it reports, or a t.Fatal in call).
func callInBackground(t *testing.T, call func(context.Context, string, map[string]any) (*mcp.CallToolResult, error), tool string, args map[string]any) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		var r *mcp.CallToolResult
		defer func() { done <- r }() // also after a t.Fatal in call
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var err error
		if r, err = call(ctx, tool, args); err != nil {
			t.Errorf("%s %v: %v", tool, args, err)
		}
	})
	return done
}

// TestConsoleEndToEnd: real serves, the real feed, the real console, a
// real browser. A command's output appears in the page, markup in it
// shows as text, Stop stops it with remote_stopped; questions of serves
// with [approval] via = "console" and "either" are answered in the page,
// the approved command runs and the denied one is refused, both audited
// via console; the audit view shows the records verified; and no
// response of the whole session holds any form of a secret.
func TestConsoleEndToEnd(t *testing.T) {
	b := browsertest.Start(t)
	s := startApprovals(t, `via = "console"`)
	// A second serve on the state directory, via either, whose client
	// declares no elicitation: its question goes to the console too.
	eitherCfg := withVia(t, s, "either")
	either := hostClient(t, s, eitherCfg, nil)
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

	// Questions only the console can answer: one approved, one denied
	// (its text carries markup, shown as text), and one of the serve
	// via either, approved.
	approved, deniedFile := "echo console-approved", filepath.Join(s.userDir, "console-denied")
	denied := fmt.Sprintf("touch %s; echo '<img src=x onerror=window.__xss=3><script>window.__xss=4</script>'", deniedFile)
	eitherCmd := "echo either-approved"
	with := func(cmd string) map[string]any { return map[string]any{"target": "always", "command": cmd} }
	viaConsole := func(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return s.client.CallTool(ctx, tool, args, nil)
	}
	viaEither := func(_ context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return either(tool, args), nil
	}
	approvedDone := callInBackground(t, viaConsole, "ssh_exec", with(approved))
	deniedDone := callInBackground(t, viaConsole, "ssh_exec", with(denied))
	eitherDone := callInBackground(t, viaEither, "ssh_exec", with(eitherCmd))
	browsertest.WaitText(t, tab, "#question-count", "3")
	browsertest.Do(t, tab, "approvals", chromedp.Click(chromedp.CSS(`button[data-view="approvals"]`)))
	answerInPage(t, tab, approved, "approve")
	qtext := answerInPage(t, tab, "console-denied", "decline")
	if !strings.Contains(qtext, "<img src=x onerror=window.__xss=3><script>window.__xss=4</script>") {
		t.Errorf("the question shows %q; want its markup as text", qtext)
	}
	answerInPage(t, tab, eitherCmd, "approve")
	browsertest.WaitText(t, tab, "#no-questions", "No question")
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("main img, main script").length`); n != 0 {
		t.Errorf("the page holds %d img or script elements made of the question", n)
	}
	if r := <-approvedDone; r == nil || r.IsError || !strings.Contains(resultText(r), "console-approved") {
		t.Errorf("approved in the page: %v", r)
	}
	if r := <-deniedDone; r == nil || !r.IsError || !strings.Contains(resultText(r), "the person at the console declined it") {
		t.Errorf("denied in the page: %v", r)
	}
	if r := <-eitherDone; r == nil || r.IsError || !strings.Contains(resultText(r), "either-approved") {
		t.Errorf("approved in the page, via either: %v", r)
	}
	if _, err := os.Stat(deniedFile); err == nil {
		t.Error("the command denied in the page ran")
	}
	for _, c := range []struct{ cmd, answer, decision string }{{approved, "approve", "allow"}, {denied, "decline", "deny"}, {eitherCmd, "approve", "allow"}} {
		in := intentOf(t, s.state, c.cmd)
		if len(in.Approvals) != 1 || in.Approvals[0].Answer != c.answer || in.Approvals[0].Via != "console" || in.Decision != c.decision {
			t.Errorf("intent of %q: decision %q, approvals %+v; want %s, answered %s via console", c.cmd, in.Decision, in.Approvals, c.decision, c.answer)
		}
		if c.answer == "decline" {
			if out := outcomeOfHandle(t, s.state, in); out.Status != "denied" {
				t.Errorf("outcome of %q: %+v; want denied", c.cmd, out)
			}
		}
	}

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
