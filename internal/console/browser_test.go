package console

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/actiongw/actiongw/internal/feed"
	"github.com/actiongw/actiongw/internal/testkit/browsertest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// hostile is what a prompt-injected agent or a remote host would put in a
// command, an output, a target glob or a question: markup, a script,
// terminal escapes and a right-to-left override.
const hostile = "<img src=x onerror=\"window.__xss=1;alert(1)\"><script>window.__xss=2;alert(2)</script>" +
	"\x1b[2J\x1b]0;owned\x07 \u202Etxt.exe\u2066 <b>bold</b>"

// TestBrowserConsole drives the page in headless Chromium against a fake
// watcher: the login, an action and its output appearing, an approval
// and a denial, a stop, the audit view and its chain, the timeline; and
// markup anywhere runs nothing and shows as text.
func TestBrowserConsole(t *testing.T) {
	b := browsertest.Start(t)
	dir, _ := writeAudit(t)
	f := newFake()
	now := time.Now().UTC()
	f.setSnapshot(feed.Snapshot{
		Serves:  []feed.Serve{{ID: "s1", PID: 4242, Client: "claude-code", Started: now.Add(-time.Hour)}},
		Actions: []feed.Action{{Serve: "s1", Handle: "ssh-0", Tool: "ssh_exec", Target: "box", What: "uptime", Client: "claude-code", Status: "exited", Started: now.Add(-time.Minute), Ended: now.Add(-time.Minute + time.Second)}},
	})
	f.onAnswer = func(serve, question string, a feed.Answer) {
		f.events <- feed.Event{QuestionGone: question}
	}
	f.onStop = func(serve, handle string) {
		stopped := true
		f.events <- feed.Event{Action: &feed.Action{Serve: serve, Handle: handle, Tool: "ssh_exec", Target: "box", What: "sleep 600", Status: "cancelled",
			Started: now, Ended: time.Now(), RemoteStopped: &stopped, StopReason: "stopped from the console"}}
	}
	s := startConsole(t, f, dir)
	tab := b.Tab(t)

	// The login: the token goes, the address the page ends on has none.
	browsertest.Do(t, tab, "login", chromedp.Navigate(s.LoginURL()))
	loc, _ := chromedp.Run(tab, chromedp.Location())
	if loc != "http://"+s.Addr()+"/" {
		t.Errorf("after the login the page is at %q; want the console's / without the token", loc)
	}
	browsertest.WaitText(t, tab, "#conn", "live")
	browsertest.WaitText(t, tab, "#serves", "pid 4242")
	// A second browser, the same link: refused.
	other := b.Tab(t)
	browsertest.Do(t, other, "login again", chromedp.Navigate(s.LoginURL()))
	browsertest.WaitText(t, other, "body", "used already")

	// An action starts and its output streams in.
	f.events <- feed.Event{Action: &feed.Action{Serve: "s1", Handle: "ssh-1", Tool: "ssh_exec", Target: "box", What: "tail -f /var/log/syslog " + hostile, Client: "claude-code", Status: "running", Started: now}}
	browsertest.WaitText(t, tab, "#actions td.what", "tail -f")
	f.events <- feed.Event{Output: &feed.Output{Serve: "s1", Handle: "ssh-1", Stream: "stdout", Offset: 0, Data: "first line\n"}}
	browsertest.WaitText(t, tab, "#output-streams pre", "first line")
	f.events <- feed.Event{Output: &feed.Output{Serve: "s1", Handle: "ssh-1", Stream: "stdout", Offset: 11, Data: "second " + hostile + "\n"}}
	out := browsertest.WaitText(t, tab, "#output-streams pre", "second")
	what := browsertest.WaitText(t, tab, "#actions td.what", "tail -f")
	for name, text := range map[string]string{"the output": out, "the command": what} {
		for _, want := range []string{`<img src=x onerror="window.__xss=1;alert(1)">`, "<script>window.__xss=2", "␛[2J", "␛]0;owned␇", `\u202E`, `\u2066`, "<b>bold</b>"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s shows %q; want %q in it, as text", name, text, want)
			}
		}
		if strings.ContainsAny(text, "\x1b\u202E\u2066") {
			t.Errorf("%s holds a raw escape or override: %q", name, text)
		}
	}

	// Two questions: one approved, one denied.
	for i, q := range []string{"q-approve", "q-deny"} {
		f.events <- feed.Event{Question: &feed.Question{Serve: "s1", ID: q, Asked: "command", Tool: "ssh_exec", Target: "box",
			Text: fmt.Sprintf("Run on box: systemctl restart app%d %s", i, hostile), Remember: 10 * time.Minute, AskedAt: now, Expires: now.Add(5 * time.Minute)}}
	}
	browsertest.WaitText(t, tab, "#question-count", "2")
	browsertest.Do(t, tab, "approvals", chromedp.Click(chromedp.CSS(`button[data-view="approvals"]`)))
	qtext := browsertest.WaitText(t, tab, ".question .qtext", "app1")
	if !strings.Contains(qtext, "<script>") || !strings.Contains(qtext, `\u202E`) {
		t.Errorf("the question shows %q; want its markup and override as text", qtext)
	}
	browsertest.WaitText(t, tab, `.question[data-id="q-approve"] button[data-answer="approve_for"]`, "Approve for 10 min")
	browsertest.Do(t, tab, "approve", chromedp.Click(chromedp.CSS(`.question[data-id="q-approve"] button[data-answer="approve"]`)))
	browsertest.WaitText(t, tab, "#question-count", "1")
	browsertest.Do(t, tab, "deny", chromedp.Click(chromedp.CSS(`.question[data-id="q-deny"] button[data-answer="decline"]`)))
	browsertest.WaitText(t, tab, "#no-questions", "No question")
	waitFor(t, "the answers", func() bool { _, a := f.recorded(); return len(a) == 2 })
	if _, answers := f.recorded(); strings.Join(answers, " ") != "s1/q-approve/approve s1/q-deny/decline" {
		t.Errorf("the watcher got answers %q; want q-approve approved and q-deny declined", answers)
	}

	// Stop the running action: it ends with remote_stopped.
	browsertest.Do(t, tab, "live", chromedp.Click(chromedp.CSS(`button[data-view="live"]`)))
	browsertest.Do(t, tab, "stop", chromedp.Click(chromedp.CSS(`tr[data-handle="ssh-1"] button.stop`)))
	browsertest.WaitText(t, tab, `tr[data-handle="ssh-1"] td.status`, "remote_stopped: true")
	if stops, _ := f.recorded(); strings.Join(stops, " ") != "s1/ssh-1" {
		t.Errorf("the watcher got stops %q; want s1/ssh-1", stops)
	}
	if screenshotDocs() {
		shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The audit view: the records, and the chain verified.
	browsertest.Do(t, tab, "audit", chromedp.Click(chromedp.CSS(`button[data-view="audit"]`)))
	browsertest.WaitText(t, tab, "#chain .state", "verified")
	browsertest.WaitText(t, tab, "#audit-table td.what", "rm -rf /")
	browsertest.WaitText(t, tab, "#audit-table td.status", "remote_stopped: true")

	// The timeline: a bar per action of the last hour, per target.
	browsertest.Do(t, tab, "timeline", chromedp.Click(chromedp.CSS(`button[data-view="timeline"]`)))
	browsertest.WaitText(t, tab, "#timeline-box svg text", "api")
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("#timeline-box svg rect").length`); n < 3 {
		t.Errorf("the timeline draws %d bars; want one for each of http-2, ssh-3 and the live actions", n)
	}

	// Nothing injected ran: no dialog, no global set, no element made of
	// the text, and the page's own script threw nothing.
	if x := browsertest.Eval[string](t, tab, `typeof window.__xss`); x != "undefined" {
		t.Errorf("window.__xss is %s: injected script ran", x)
	}
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("main img, main script, main b").length`); n != 0 {
		t.Errorf("the page holds %d img, script or b elements made of the agent's text", n)
	}
	if d := b.Dialogs(); len(d) > 0 {
		t.Errorf("dialogs opened: %q", d)
	}
	if e := b.Exceptions(); len(e) > 0 {
		t.Errorf("the page's script threw: %q", e)
	}
}

// screenshotDocs says whether to write docs/console.png
// (ACTIONGW_SCREENSHOT=1 go test -run TestBrowserConsole ./internal/console).
func screenshotDocs() bool { return os.Getenv("ACTIONGW_SCREENSHOT") == "1" }

// TestBrowserFirstPaint reports how long the live view takes to paint
// 1000 recent actions and 10 running ones, from the navigation's start to
// the frame after its rows are in (the bound is 1 s on this
// machine; reported, not asserted): the running ones and the newest 100
// are drawn, the rest on "Show older".
func TestBrowserFirstPaint(t *testing.T) {
	b := browsertest.Start(t)
	f := newFake()
	now := time.Now().UTC()
	var snap feed.Snapshot
	for i := range 1010 {
		a := feed.Action{Serve: "s1", Handle: fmt.Sprintf("ssh-%d", i), Tool: "ssh_exec", Target: fmt.Sprintf("web%d", i%20),
			What: fmt.Sprintf("journalctl -u app%d -n 100", i), Client: "claude-code", Status: "exited",
			Started: now.Add(-time.Duration(i) * time.Second), Ended: now.Add(-time.Duration(i)*time.Second + 300*time.Millisecond)}
		// The running ones spread among the finished, the last beyond the
		// newest 100.
		if i%112 == 0 {
			a.Status, a.Ended = "running", time.Time{}
		}
		snap.Actions = append(snap.Actions, a)
	}
	f.setSnapshot(snap)
	s := startConsole(t, f, t.TempDir())
	tab := b.Tab(t)
	rows := `document.querySelectorAll("#actions tbody tr").length`
	browsertest.Do(t, tab, "login", chromedp.Navigate(s.LoginURL()))
	// When the rows are in, the page's next frame, then a task after it:
	// the time the rows were painted.
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](
		rows+` >= 110 && (window.__painted ??= (window.__rowsIn = performance.now(), new Promise(ok => requestAnimationFrame(() => setTimeout(() => ok(performance.now()))))), true)`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("the rows did not appear: %v", err)
	}
	ms, err := chromedp.Run(tab, chromedp.Evaluate[float64](`window.__painted`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	// Where the time went: the page's own work is from the script's
	// start to the rows painted.
	script := browsertest.Eval[float64](t, tab, `performance.getEntriesByType("resource").find(e => e.name.endsWith("/app.js")).responseEnd`)
	rowsIn := browsertest.Eval[float64](t, tab, `window.__rowsIn`)
	t.Logf("first paint of 1000 recent and 10 running actions: %.0f ms after the navigation began (bound: 1000 ms); app.js loaded at %.0f ms, the rows in at %.0f ms", ms, script, rowsIn)

	if n := browsertest.Eval[int](t, tab, rows); n != 110 {
		t.Errorf("the live view draws %d rows; want the 10 running and the newest 100 finished", n)
	}
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("#actions td.st-running").length`); n != 10 {
		t.Errorf("the live view shows %d running actions; want all 10", n)
	}
	browsertest.WaitText(t, tab, "#older", "900 older finished actions not shown")
	for range 2 {
		browsertest.Do(t, tab, "show older", chromedp.Click(chromedp.CSS("#show-older")))
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](rows+` === 1010 && document.getElementById("older").hidden`,
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Errorf("after Show older twice the table does not hold all 1010 actions: %v (%d rows)", err, browsertest.Eval[int](t, tab, rows))
	}
}
