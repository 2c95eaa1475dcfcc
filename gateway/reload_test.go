package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

// reparse parses the fixture's config with extra TOML appended.
func (f *fixture) reparse(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(f.toml + extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestGatewayReload(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	run := func(target, command string) *ToolResult {
		return f.gw.SSHExec(ctx, SSHExecInput{Target: target, Command: command}, nil)
	}
	if r := run("box", "echo before"); r.IsError {
		t.Fatalf("before the reload: %s", r.Text)
	}

	// A running action keeps the configuration it started with.
	started := make(chan *ToolResult)
	go func() { started <- run("box", "sleep 1; echo survived") }()
	testenv.WaitFor(t, 30*time.Second, "the sleep to start", func() bool { return f.gw.ActiveActions() == 1 })

	// A new target, and a rule on the running one's target, take effect
	// at once for new calls; the running one keeps its configuration.
	cfg := f.reparse(t, `
[ssh.late]
host = "`+f.cfg.SSH["box"].Host+`"
port = `+strconv.Itoa(f.cfg.SSH["box"].Port)+`
user = "`+f.cfg.SSH["box"].User+`"
key_secret = "box-key"
host_key = "`+f.cfg.SSH["box"].HostKey+`"
deny_commands = ["^echo denied"]
`)
	cfg.SSH["box"].DenyCommands = append(cfg.SSH["box"].DenyCommands, "^sleep")
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if r := run("box", "sleep 0"); !r.IsError || !strings.Contains(r.Text, "denied") {
		t.Errorf("a rule added to box by the reload: %s", r.Text)
	}
	if r := run("late", "echo added"); r.IsError {
		t.Errorf("a target added by the reload: %s", r.Text)
	}
	if r := run("late", "echo denied"); !r.IsError || !strings.Contains(r.Text, "denied") {
		t.Errorf("a rule added by the reload did not deny: %s", r.Text)
	}
	if r := <-started; r.IsError || r.Structured.(*SSHExecOutput).Stdout.Head != "survived\n" {
		t.Errorf("the action running during the reload: %s", r.Text)
	}
	if note := f.gw.TakeNote(sizeOf(0)); note != "" {
		t.Errorf("a reload that worked left a note: %q", note)
	}

	// A reload that fails keeps the configuration and says why, once.
	if err := f.gw.Reload(ctx, nil, errors.New("config.toml:3: expected '='")); err == nil {
		t.Fatal("Reload with a load error returned nil")
	}
	if r := run("late", "echo still"); r.IsError {
		t.Errorf("after a failed reload the previous configuration should stay: %s", r.Text)
	}
	if note := f.gw.TakeNote(sizeOf(1 << 30)); note != "" {
		t.Errorf("a note that does not fit its room was given: %q", note)
	}
	note := f.gw.TakeNote(sizeOf(0))
	for _, want := range []string{"could not be loaded", "previous configuration is still in effect", "config.toml:3"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if again := f.gw.TakeNote(sizeOf(0)); again != "" {
		t.Errorf("the note came twice: %q", again)
	}

	// [server] changes wait for a restart, and the note says so.
	cfg = f.reparse(t, "")
	cfg.Server.ResultBytes *= 2
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if note := f.gw.TakeNote(sizeOf(0)); !strings.Contains(note, "[server]") || !strings.Contains(note, "restart") {
		t.Errorf("note after a [server] change: %q", note)
	}
	// ssh_config is no [server] change that waits: it took effect as the
	// config loaded.
	cfg = f.reparse(t, "")
	cfg.Server.SSHConfig = "none"
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if note := f.gw.TakeNote(sizeOf(0)); note != "" {
		t.Errorf("note after an ssh_config change: %q; want none", note)
	}
	if got, _ := f.gw.Config(); got.Server.ResultBytes != f.cfg.Server.ResultBytes {
		t.Errorf("result_bytes %d in effect; want the start's %d", got.Server.ResultBytes, f.cfg.Server.ResultBytes)
	}
	if r := run("late", "echo gone"); !r.IsError || !strings.Contains(r.Text, "unknown SSH target") {
		t.Errorf("a target removed by the reload: %s", r.Text)
	}
}

func TestGatewaySecretLookedUpAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.gw.SSHExec(ctx, SSHExecInput{Target: "nokey", Command: "echo hi"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "actiongw secret set missing-key") || strings.Count(r.Text, `"nokey"`) != 1 {
		t.Fatalf("a target whose secret is missing: %s; want the fix, and the target named once", r.Text)
	}
	// As `actiongw secret set` would, while the gateway runs.
	f.store["missing-key"] = f.store["box-key"]
	var last string
	ok := testenv.Eventually(10*time.Second, func() bool {
		r := f.gw.SSHExec(ctx, SSHExecInput{Target: "nokey", Command: "echo hi"}, nil)
		last = r.Text
		return !r.IsError
	})
	if !ok {
		t.Fatalf("the secret stored after start was never used: %s", last)
	}
}

func TestGatewayStartsWithBrokenConfig(t *testing.T) {
	ctx := context.Background()
	gw := New(ctx, Options{ConfigError: errors.New("/etc/actiongw.toml: ssh.box.timeout: invalid duration"), Secrets: newFixture(t).store})
	defer gw.Close()
	for name, r := range map[string]*ToolResult{
		"ssh_exec":      gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "true"}, nil),
		"http_request":  gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "api", Method: "GET", Path: "/"}, nil),
		"read_output":   gw.ReadOutput(ctx, ReadOutputInput{Handle: "h", Stream: "stdout"}),
		"search_output": gw.SearchOutput(ctx, SearchOutputInput{Handle: "h", Stream: "stdout", Pattern: "x"}),
	} {
		for _, want := range []string{"configuration cannot be used", "ssh.box.timeout", "actiongw check", "again when it changes"} {
			if !r.IsError || !strings.Contains(r.Text, want) {
				t.Errorf("%s with a broken config: isError %v, text %q lacks %q", name, r.IsError, r.Text, want)
			}
		}
	}
	if _, err := gw.Config(); err == nil {
		t.Error("Config() of a broken gateway returned no error")
	}
}

func TestGatewayBrokenThenFixed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gw := New(ctx, Options{ConfigError: errors.New("broken"), Secrets: f.store})
	defer gw.Close()
	// A second failure replaces the reason.
	gw.Reload(ctx, nil, errors.New("still broken: line 7"))
	if r := gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "true"}, nil); !strings.Contains(r.Text, "line 7") {
		t.Errorf("the latest reason is not given: %s", r.Text)
	}
	cfg := f.reparse(t, "")
	cfg.Server.StateDir = t.TempDir() // not the fixture's gateway's
	if err := gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if r := gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "echo fixed"}, nil); r.IsError {
		t.Errorf("after the fix: %s", r.Text)
	}
}

func TestUnknownTargetNamesTheRightTool(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name string
		r    *ToolResult
		want []string
	}{
		{"endpoint given to ssh_exec", f.gw.SSHExec(ctx, SSHExecInput{Target: "api", Command: "true"}, nil),
			[]string{`"api" is not an SSH target`, "http_request", `"endpoint": "api"`}},
		{"target given to http_request", f.gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: "box", Method: "GET", Path: "/"}, nil),
			[]string{`"box" is not an HTTP endpoint`, "ssh_exec", `"target": "box"`}},
		{"unknown target", f.gw.SSHExec(ctx, SSHExecInput{Target: "nope", Command: "true"}, nil),
			[]string{`unknown SSH target "nope"`, "box, nokey, single", "list_targets"}},
	}
	for _, tt := range tests {
		for _, w := range tt.want {
			if !tt.r.IsError || !strings.Contains(tt.r.Text, w) {
				t.Errorf("%s: %q lacks %q", tt.name, tt.r.Text, w)
			}
		}
	}
}

func TestTimeoutCapIsSaid(t *testing.T) {
	f := newFixture(t)
	r := f.gw.SSHExec(context.Background(), SSHExecInput{Target: "box", Command: "true", TimeoutS: 99999}, nil)
	for _, want := range []string{"timeout_s=99999", "max_timeout", "30m0s"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("text %q lacks %q", r.Text, want)
		}
	}
}

// countingStore counts the lookups of each name.
type countingStore struct {
	SecretStore
	mu   sync.Mutex
	gets map[string]int
}

func (c *countingStore) Get(ctx context.Context, name string) (secrets.Value, error) {
	c.mu.Lock()
	c.gets[name]++
	c.mu.Unlock()
	return c.SecretStore.Get(ctx, name)
}

// A hostile agent calling a target whose secret is missing, as fast as it
// can, costs at most one keyring lookup per secretRetry.
func TestMissingSecretLookupsBounded(t *testing.T) {
	f := newFixture(t)
	store := &countingStore{SecretStore: f.store, gets: map[string]int{}}
	ctx := context.Background()
	start := time.Now()
	gw := New(ctx, Options{Config: f.reparse(t, ""), Secrets: store})
	defer gw.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if r := gw.SSHExec(ctx, SSHExecInput{Target: "nokey", Command: "true"}, nil); !r.IsError {
					t.Errorf("nokey ran: %s", r.Text)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	store.mu.Lock()
	got := store.gets["missing-key"]
	store.mu.Unlock()
	if bound := 2 + int(elapsed/secretRetry); got > bound {
		t.Errorf("400 calls in %v looked the missing secret up %d times; want at most %d", elapsed, got, bound)
	}
}

// A reload that changes a target's host key pin (it was found wrong) must
// not reuse a connection verified under the old one.
func TestReloadDropsConnectionsOfChangedTargets(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "true"}, nil); r.IsError {
		t.Fatalf("before: %s", r.Text) // the connection is now pooled
	}
	cfg := f.reparse(t, "")
	cfg.SSH["box"].HostKey = "SHA256:" + base64.RawStdEncoding.EncodeToString(make([]byte, 32))
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	r := f.gw.SSHExec(ctx, SSHExecInput{Target: "box", Command: "true"}, nil)
	if !r.IsError || !strings.Contains(r.Text, "host key") {
		t.Errorf("after the pin changed, the call ran or failed otherwise: %s", r.Text)
	}
}

// sizeOf is a TakeNote size of a result of n bytes.
func sizeOf(n int) func() int { return func() int { return n } }

// A reload that removes a target while a call looks up its missing secret
// again leaves the call without the target: the state it gets says so.
func TestRefreshedAfterTargetRemoved(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := *f.gw.state()
	old.loaded = time.Time{} // its secrets are due a lookup
	cfg := f.reparse(t, "")
	delete(cfg.SSH, "nokey")
	if err := f.gw.Reload(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.gw.refreshed(ctx, &old).ssh["nokey"]; ok {
		t.Error("the refreshed state still has the removed target")
	}
	if r := f.gw.SSHExec(ctx, SSHExecInput{Target: "nokey", Command: "true"}, nil); !strings.Contains(r.Text, "unknown SSH target") {
		t.Errorf("a call to the removed target: %s", r.Text)
	}
}
