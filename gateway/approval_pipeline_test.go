package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// approverFunc is an Approver from a function.
type approverFunc func(ctx context.Context, q *Question) (Answer, time.Duration, error)

func (f approverFunc) Ask(ctx context.Context, q *Question) (Answer, time.Duration, error) {
	return f(ctx, q)
}

// TestApprovalRememberedAcrossReload: a person answers approve_for while a
// reload points the endpoint at another server. The answer was for the
// old server: the same request to the new one is asked about.
func TestApprovalRememberedAcrossReload(t *testing.T) {
	f := newFixture(t)
	var oldHits, newHits atomic.Int32
	oldAPI := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { oldHits.Add(1) }))
	t.Cleanup(oldAPI.Close)
	newAPI := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { newHits.Add(1) }))
	t.Cleanup(newAPI.Close)
	deploy := func(url string) *config.Config {
		return f.reparse(t, fmt.Sprintf("[http.deploy]\nbase_url = %q\nmethods = [\"POST\"]\napprove_methods = [\"POST\"]\nallow_private = true\n[approval]\nremember = \"10m\"\n", url))
	}
	ctx := context.Background()
	if err := f.gw.Reload(ctx, deploy(oldAPI.URL), nil); err != nil {
		t.Fatal(err)
	}
	in := HTTPRequestInput{Endpoint: "deploy", Method: "POST", Path: "/release", Body: "v2"}

	asked, answer := make(chan *Question, 1), make(chan struct{})
	first := make(chan *ToolResult, 1)
	go func() {
		slow := approverFunc(func(ctx context.Context, q *Question) (Answer, time.Duration, error) {
			asked <- q
			<-answer
			return AnswerApproveFor, time.Second, nil
		})
		first <- f.gw.HTTPRequest(WithApprover(ctx, slow), in, nil)
	}()
	q := <-asked
	t.Logf("the person is shown: %s", q.Message)
	if err := f.gw.Reload(ctx, deploy(newAPI.URL), nil); err != nil {
		t.Fatal(err)
	}
	close(answer)
	if r := <-first; r.IsError || oldHits.Load() != 1 {
		t.Fatalf("the approved request: %s (old server hit %d times)", r.Text, oldHits.Load())
	}

	var askedAgain bool
	watch := approverFunc(func(ctx context.Context, q *Question) (Answer, time.Duration, error) {
		askedAgain = true
		return AnswerDecline, 0, nil
	})
	f.gw.HTTPRequest(WithApprover(ctx, watch), in, nil)
	if !askedAgain || newHits.Load() != 0 {
		t.Errorf("after a reload to another server: asked %v, new server hit %d times; want a question and no request without it", askedAgain, newHits.Load())
	}
}

// TestApprovedRequestFollowsNoRedirect: on an endpoint that follows
// same-origin redirects, a POST a person approved that is answered 307
// comes back as the 307: followed, it would send the same body to a path
// the person was not shown. A POST nobody is asked about follows it.
func TestApprovedRequestFollowsNoRedirect(t *testing.T) {
	f := newFixture(t)
	var elsewhere atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/release" {
			http.Redirect(w, r, "/delete-everything", http.StatusTemporaryRedirect)
			return
		}
		elsewhere.Add(1)
	}))
	t.Cleanup(api.Close)
	ctx := context.Background()
	approve := approverFunc(func(context.Context, *Question) (Answer, time.Duration, error) { return AnswerApprove, 0, nil })
	for _, tt := range []struct {
		name, approveMethods string
		wantStatus, wantHits int
	}{
		{"approved", `["POST"]`, http.StatusTemporaryRedirect, 0},
		{"not asked", `[]`, http.StatusOK, 1},
	} {
		elsewhere.Store(0)
		cfg := f.reparse(t, fmt.Sprintf("[http.deploy]\nbase_url = %q\nmethods = [\"POST\"]\napprove_methods = %s\nfollow_redirects = \"same-origin\"\nallow_private = true\n", api.URL, tt.approveMethods))
		if err := f.gw.Reload(ctx, cfg, nil); err != nil {
			t.Fatal(err)
		}
		r := f.gw.HTTPRequest(WithApprover(ctx, approve), HTTPRequestInput{Endpoint: "deploy", Method: "POST", Path: "/release", Body: "v2"}, nil)
		out, _ := r.Structured.(*HTTPRequestOutput)
		if out == nil || out.HTTPStatus != tt.wantStatus || int(elsewhere.Load()) != tt.wantHits {
			t.Errorf("%s: %s; redirect target hit %d times; want HTTP %d and %d hits", tt.name, r.Text, elsewhere.Load(), tt.wantStatus, tt.wantHits)
		}
	}
}

// TestApprovalRequestPathAsSent: "/a%2Fb" (one segment) and "/a/b" (two)
// are different requests: the person is shown each path as it is sent,
// under the base URL's own path, and approve_for one does not send the
// other.
func TestApprovalRequestPathAsSent(t *testing.T) {
	f := newFixture(t)
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(api.Close)
	cfg := f.reparse(t, fmt.Sprintf("[http.deploy]\nbase_url = %q\nmethods = [\"POST\"]\napprove_methods = [\"POST\"]\nallow_private = true\n[approval]\nremember = \"10m\"\n", api.URL+"/v2"))
	ctx := context.Background()
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	var shown []string
	ask := approverFunc(func(_ context.Context, q *Question) (Answer, time.Duration, error) {
		shown = append(shown, q.Message)
		return AnswerApproveFor, time.Minute, nil
	})
	for _, path := range []string{"/a%2Fb", "/a/b"} {
		if r := f.gw.HTTPRequest(WithApprover(ctx, ask), HTTPRequestInput{Endpoint: "deploy", Method: "POST", Path: path}, nil); r.IsError {
			t.Fatalf("POST %s: %s", path, r.Text)
		}
	}
	if len(shown) != 2 || !strings.Contains(shown[0], "POST /v2/a%2Fb\n") || !strings.Contains(shown[1], "POST /v2/a/b\n") || hits.Load() != 2 {
		t.Errorf("the person was shown %q (%d requests sent); want each path as sent, each asked about", shown, hits.Load())
	}
}

// TestApprovalEnvShownAndKeyed: two calls that set different environments
// (one variable whose value holds a line break, or two variables) are
// shown as different texts and have different keys, so approve_for one
// does not run the other.
func TestApprovalEnvShownAndKeyed(t *testing.T) {
	commands, err := policy.CompileCommands("web", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &sshTarget{rules: &policy.SSH{Target: "web", Commands: commands, Approve: config.ApproveAlways, AllowEnv: []string{"LC_ALL", "PAGER"},
		MaxCommand: 1 << 10, MaxStdin: 1 << 10, SettableEnv: sshexec.SettableEnv}, where: "u@web:22", target: &sshexec.Target{}}
	cfg := &config.Config{Approval: config.Approval{Timeout: time.Minute, Remember: time.Hour}}
	question := func(env map[string]string) *Question {
		a := (&Gateway{}).sshExecAction(cfg, st, SSHExecInput{Target: "web", Command: "git log", Env: env})
		d, err := a.kind.check(&a.intent)
		if err != nil || d.Verdict != policy.Asked {
			t.Fatalf("check %q: %v, %v; want asked", env, d.Verdict, err)
		}
		return a.kind.(asker).question()
	}
	two := question(map[string]string{"LC_ALL": "C", "PAGER": "cat"})
	one := question(map[string]string{"LC_ALL": "C\nPAGER=cat"})
	if two.Message == one.Message {
		t.Errorf("both environments are shown as\n%s", one.Message)
	}
	if two.Key == one.Key {
		t.Errorf("both environments have one remembered key")
	}
}

// TestApprovalWithdrawn: a call cancelled while its question waits ran
// nothing and nobody approved it: its intent lists the question as
// withdrawn and does not say allow.
func TestApprovalWithdrawn(t *testing.T) {
	f := newFixture(t)
	cfg := f.reparse(t, "")
	cfg.SSH["box"].Approve = config.ApproveAlways
	if err := f.gw.Reload(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waiting := approverFunc(func(ctx context.Context, q *Question) (Answer, time.Duration, error) {
		cancel() // the agent gives up while the person reads
		<-ctx.Done()
		return "", time.Second, ctx.Err()
	})
	if r := f.gw.SSHExec(WithApprover(ctx, waiting), SSHExecInput{Target: "box", Command: "echo never-approved"}, nil); r.status != StatusCancelled {
		t.Errorf("a call cancelled while asked: %s (status %q); want cancelled", r.Text, r.status)
	}
	found := false
	for _, line := range strings.Split(readAudit(t, f), "\n") {
		var r audit.Record
		if json.Unmarshal([]byte(line), &r) != nil || r.Kind != audit.KindIntent || r.Command != "echo never-approved" {
			continue
		}
		found = true
		if r.Decision != "deny" || len(r.Approvals) != 1 || r.Approvals[0].Answer != "withdrawn" {
			t.Errorf("intent of a call cancelled while asked: decision %q, approvals %+v; want the question and no allow", r.Decision, r.Approvals)
		}
	}
	if !found {
		t.Error("no intent of the call cancelled while asked")
	}
}

// TestApprovalJumpChain: a target reached through three jump hosts, each
// with host_key_policy = "ask" and a first-use key, and approve =
// "always": five questions, all recorded in the intent, and the command
// runs. (Each hop has its own known_hosts, so that one sshd serves as
// four unknown hosts.)
func TestApprovalJumpChain(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	dir := t.TempDir()
	hop := func(name, jump, extra string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\nhost_key_policy = \"ask\"\njump = %q\n%s\n",
			name, s.Host, s.Port, s.User, filepath.Join(dir, name+"-known_hosts"), jump, extra)
	}
	text := fmt.Sprintf("[server]\nstate_dir = %q\n", dir) + hop("j3", "", "") + hop("j2", "j3", "") + hop("j1", "j2", "") + hop("web", "j1", `approve = "always"`)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"box-key": s.ClientKey}})
	if _, err := gw.Config(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	var asked atomic.Int32
	yes := approverFunc(func(ctx context.Context, q *Question) (Answer, time.Duration, error) {
		asked.Add(1)
		return AnswerApprove, 0, nil
	})
	r := gw.SSHExec(WithApprover(context.Background(), yes), SSHExecInput{Target: "web", Command: "echo through-three-jumps"}, nil)
	keys, _ := filepath.Glob(filepath.Join(dir, "*-known_hosts"))
	if r.IsError {
		t.Errorf("after %d approvals (%d known_hosts files written): %s", asked.Load(), len(keys), r.Text)
	}
}
