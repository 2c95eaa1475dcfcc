//go:build linux

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/browsertest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// pointedClient is a client that can open addresses (URL-mode
// elicitation), and what it was sent. It answers every elicitation with
// accept and a decision of approve, as a client that would approve its
// own actions does: none of that may count.
type pointedClient struct {
	mu        sync.Mutex
	asked     []*mcp.ElicitParams
	completed []string // elicitation ids of notifications/elicitation/complete
}

func (p *pointedClient) options(caps *mcp.ElicitationCapabilities) mcphost.Options {
	return mcphost.Options{
		Elicitation: caps,
		OnElicit: func(_ context.Context, q *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			p.mu.Lock()
			p.asked = append(p.asked, q)
			p.mu.Unlock()
			return decided("approve"), nil
		},
		OnNotify: func(method string, params json.RawMessage) {
			if method != "notifications/elicitation/complete" {
				return
			}
			var c mcp.ElicitationCompleteParams
			if json.Unmarshal(params, &c) == nil {
				p.mu.Lock()
				p.completed = append(p.completed, c.ElicitationID)
				p.mu.Unlock()
			}
		},
	}
}

// pointer waits for the URL-mode elicitation whose message holds what,
// and returns it.
func (p *pointedClient) pointer(t *testing.T, what string) *mcp.ElicitParams {
	t.Helper()
	var got *mcp.ElicitParams
	testenv.WaitFor(t, time.Minute, "the client pointed to the console about "+what, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, q := range p.asked {
			if strings.Contains(q.Message, what) {
				got = q
				return true
			}
		}
		return false
	})
	return got
}

func (p *pointedClient) forms() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, q := range p.asked {
		if q.Mode != "url" {
			n++
		}
	}
	return n
}

// TestConsoleURLElicitation: a client that declares URL-mode elicitation
// is handed the question's place on the console's page, an address with
// no credential in it (opening it without the session is refused), for a
// question only the console answers: via console, and via either when
// the client cannot ask by form. What the client answers to it (accept
// with "approve") decides nothing: the person opens the page from the
// client, sees the question marked there, and the console's answer is
// the one audited; then the client is told the question is over.
func TestConsoleURLElicitation(t *testing.T) {
	b := browsertest.Start(t)
	s := startApprovals(t, `via = "console"`)
	both := &pointedClient{}
	viaConsole := hostClientWith(t, s, s.cfgPath, both.options(&mcp.ElicitationCapabilities{
		Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}))
	urlOnly := &pointedClient{}
	viaEither := hostClientWith(t, s, withVia(t, s, "either"), urlOnly.options(&mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}))
	loginURL := startConsole(t, s)
	tab := b.Tab(t)
	browsertest.Do(t, tab, "login", chromedp.Navigate(loginURL))
	browsertest.WaitText(t, tab, "#conn", "live")
	// The serves learn the page once the console has connected to them.
	browsertest.WaitText(t, tab, "#serves", "pid ")

	deniedFile := filepath.Join(s.userDir, "pointed-denied")
	denied := "touch " + deniedFile
	approved := "echo pointed-approved"
	call := func(c func(string, map[string]any) *mcp.CallToolResult) func(context.Context, string, map[string]any) (*mcp.CallToolResult, error) {
		return func(_ context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
			return c(tool, args), nil
		}
	}
	deniedDone := callInBackground(t, call(viaConsole), "ssh_exec", map[string]any{"target": "always", "command": denied})
	approvedDone := callInBackground(t, call(viaEither), "ssh_exec", map[string]any{"target": "always", "command": approved})

	page := regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/#question=[A-Z0-9]+$`)
	login := strings.SplitN(loginURL, "?", 2)
	token := strings.TrimPrefix(login[1], "token=")
	questions := []struct {
		client *pointedClient
		what   string
		answer string
		done   <-chan *mcp.CallToolResult
	}{{both, denied, "decline", deniedDone}, {urlOnly, approved, "approve", approvedDone}}
	for i, c := range questions {
		q := c.client.pointer(t, c.what)
		if q.Mode != "url" || !page.MatchString(q.URL) || q.ElicitationID == "" {
			t.Fatalf("pointed with mode %q, url %q, id %q; want url mode, the console's page and an id", q.Mode, q.URL, q.ElicitationID)
		}
		if strings.Contains(q.URL, token) || !strings.HasPrefix(q.URL, login[0][:len(login[0])-len("login")]) {
			t.Errorf("the address handed to the client, %q, holds the login token or is not the console's", q.URL)
		}
		// The client accepted with "approve" at once; its call, and
		// those of the questions not yet answered, still wait.
		for _, later := range questions[i:] {
			select {
			case r := <-later.done:
				t.Fatalf("a call ended on the client's answer to its pointer: %v", r)
			default:
			}
		}
		// Without the session, the address opens nothing.
		resp, err := http.Get(q.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the pointed address without the session: %s; want 401", resp.Status)
		}
		// The person opens it from the client: the page shows that
		// question, marked, among the questions.
		browsertest.Do(t, tab, "open the pointed address", chromedp.Navigate(q.URL))
		marked := browsertest.WaitText(t, tab, "#questions .question.pointed .qtext", c.what)
		if !strings.Contains(marked, c.what) {
			t.Errorf("the marked question reads %q; want the one about %q", marked, c.what)
		}
		if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("#questions .question.pointed").length`); n != 1 {
			t.Errorf("%d questions are marked; want the one the address names", n)
		}
		answerInPage(t, tab, c.what, c.answer)
	}

	if r := <-deniedDone; r == nil || !r.IsError || !strings.Contains(resultText(r), "the person at the console declined it") {
		t.Errorf("denied in the console, the client having accepted its pointer: %v", r)
	}
	if _, err := os.Stat(deniedFile); err == nil {
		t.Error("the command denied in the console ran")
	}
	if r := <-approvedDone; r == nil || r.IsError || !strings.Contains(resultText(r), "pointed-approved") {
		t.Errorf("approved in the console via either, pointed: %v", r)
	}
	for _, c := range []struct{ cmd, answer string }{{denied, "decline"}, {approved, "approve"}} {
		in := intentOf(t, s.state, c.cmd)
		if len(in.Approvals) != 1 || in.Approvals[0].Answer != c.answer || in.Approvals[0].Via != "console" {
			t.Errorf("intent of %q: approvals %+v; want %s via console", c.cmd, in.Approvals, c.answer)
		}
	}
	if n := both.forms(); n != 0 {
		t.Errorf("via console, the client was asked %d form questions; want none", n)
	}
	for _, c := range []*pointedClient{both, urlOnly} {
		testenv.WaitFor(t, time.Minute, "the client told its question is over", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.completed) == 1 && c.completed[0] == c.asked[0].ElicitationID
		})
	}

	// An address that names no waiting question says so.
	browsertest.Do(t, tab, "a question gone", chromedp.Navigate(strings.Split(both.asked[0].URL, "#")[0]+"#question=GONE"), chromedp.Reload())
	browsertest.WaitText(t, tab, "#notice", "no longer waiting")
}
