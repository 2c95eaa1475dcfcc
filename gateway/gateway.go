package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// SecretStore is what the gateway needs of the keyring.
type SecretStore interface {
	Get(ctx context.Context, name string) (secrets.Value, error)
}

// Options configure a Gateway.
type Options struct {
	Config *Config
	// Secrets is where referenced secrets are read; nil means the OS
	// keyring under service "actiongw".
	Secrets SecretStore
	Logger  *slog.Logger
	// QueueWait is how long a call waits for a free action slot before it
	// gets a busy error; zero means 10s.
	QueueWait time.Duration
}

// ErrShutdown is the cancellation cause of actions still running when the
// gateway closes.
var ErrShutdown = errors.New("server shutting down")

// Gateway runs actions: it checks policy, injects credentials, runs the
// action with its output going through redacting captures into the spool,
// and writes the audit trail. It is safe for concurrent use.
type Gateway struct {
	cfg   *Config
	log   *slog.Logger
	red   *Redactor
	spool *Spool
	audit *AuditLog
	ssh   *sshexec.Pool
	http  *httpact.Client
	limit *limiter

	sshTargets    map[string]*sshTarget
	httpEndpoints map[string]*httpEndpoint

	ctx    context.Context // cancelled by Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // running actions
	active atomic.Int64
}

type sshTarget struct {
	target   *sshexec.Target // nil when err is set
	err      error           // why the target cannot be used (a missing secret)
	commands *policy.Commands
	output   int64
	stdin    int64
}

type httpEndpoint struct {
	endpoint *httpact.Endpoint
	err      error
	requests *policy.Requests
}

// New loads every secret the config references, registers them with the
// redactor, and opens the spool and the audit log under the state
// directory. A secret that cannot be loaded makes only the targets that use
// it fail, with the same error on every call; a secret too short to redact
// safely is refused here.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	cfg, log := opts.Config, opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store := opts.Secrets
	if store == nil {
		store = &secrets.Keyring{}
	}
	values, loadErrs := loadSecrets(ctx, store, cfg.SecretNames())
	for name, err := range loadErrs {
		log.Warn("secret not loaded; targets that use it will fail", "secret", name, "error", err)
	}
	raw := make(map[string][]byte, len(values))
	for name, v := range values {
		raw[name] = v.Reveal()
	}
	red, err := NewRedactor(raw)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Server.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	spool, err := OpenSpool(filepath.Join(cfg.Server.StateDir, "spool"), SpoolOptions{
		TTL: cfg.Server.SpoolTTL, MaxBytes: cfg.Server.SpoolMaxBytes,
		RetainHeadBytes: cfg.Server.RetainHeadBytes, RetainTailBytes: cfg.Server.RetainTailBytes,
	})
	if err != nil {
		return nil, err
	}
	audit, err := OpenAudit(AuditPath(cfg), red.RedactString)
	if err != nil {
		return nil, err
	}
	queueWait := opts.QueueWait
	if queueWait == 0 {
		queueWait = 10 * time.Second
	}
	perTarget := map[string]int{}
	for name, t := range cfg.SSH {
		perTarget[name] = t.MaxConcurrent
	}
	for name, e := range cfg.HTTP {
		perTarget[name] = e.MaxConcurrent
	}
	g := &Gateway{
		cfg: cfg, log: log, red: red, spool: spool, audit: audit,
		ssh: sshexec.NewPool(log), http: httpact.NewClient(log),
		limit:         newLimiter(cfg.Server.MaxConcurrentActions, perTarget, queueWait),
		sshTargets:    map[string]*sshTarget{},
		httpEndpoints: map[string]*httpEndpoint{},
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	for name := range cfg.SSH {
		g.sshTargets[name] = g.buildSSHTarget(name, values, loadErrs)
	}
	for name := range cfg.HTTP {
		g.httpEndpoints[name] = g.buildHTTPEndpoint(name, values, loadErrs)
	}
	return g, nil
}

func loadSecrets(ctx context.Context, store SecretStore, names []string) (map[string]secrets.Value, map[string]error) {
	values, errs := map[string]secrets.Value{}, map[string]error{}
	var whole error // an error of the keyring as a whole applies to every name
	for _, name := range names {
		if whole != nil {
			errs[name] = whole
			continue
		}
		v, err := store.Get(ctx, name)
		switch {
		case errors.Is(err, secrets.ErrNoService), errors.Is(err, secrets.ErrLocked):
			whole, errs[name] = err, err
		case err != nil:
			errs[name] = err
		default:
			values[name] = v
		}
	}
	return values, errs
}

// secretBytes returns the named secret, or the error that kept it from
// loading; "" gives nil.
func secretBytes(name string, values map[string]secrets.Value, errs map[string]error) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	if err := errs[name]; err != nil {
		return nil, err
	}
	return values[name].Reveal(), nil
}

func (g *Gateway) buildSSHTarget(name string, values map[string]secrets.Value, errs map[string]error) *sshTarget {
	c := g.cfg.SSH[name]
	st := &sshTarget{output: c.OutputLimit, stdin: c.MaxStdinBytes}
	// Patterns were compiled once by Validate; this cannot fail.
	st.commands, st.err = policy.CompileCommands(name, c.AllowCommands, c.DenyCommands)
	if st.err != nil {
		return st
	}
	var build func(name string, depth int) (*sshexec.Target, error)
	build = func(name string, depth int) (*sshexec.Target, error) {
		c := g.cfg.SSH[name]
		t := &sshexec.Target{
			Name: name, Host: c.Host, Port: c.Port, User: c.User,
			KnownHostsPath: c.KnownHosts, HostKey: c.HostKey,
			MaxSessions: c.MaxSessions, Keepalive: c.Keepalive, MaxTimeout: c.MaxTimeout,
			StopMode: sshexec.StopMode(c.StopMode), UsePTY: c.PTY,
		}
		var err1, err2, err3 error
		t.Auth.PrivateKey, err1 = secretBytes(c.KeySecret, values, errs)
		t.Auth.Passphrase, err2 = secretBytes(c.PassphraseSecret, values, errs)
		t.Auth.Password, err3 = secretBytes(c.PasswordSecret, values, errs)
		t.Auth.Agent = c.Agent
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		if c.Jump != "" {
			j, err := build(c.Jump, depth+1)
			if err != nil {
				return nil, fmt.Errorf("jump host: %w", err)
			}
			t.Jump = j
		}
		return t, nil
	}
	st.target, st.err = build(name, 0)
	return st
}

func (g *Gateway) buildHTTPEndpoint(name string, values map[string]secrets.Value, errs map[string]error) *httpEndpoint {
	c := g.cfg.HTTP[name]
	he := &httpEndpoint{requests: &policy.Requests{Target: name, Methods: c.Methods, Paths: c.Paths}}
	e := &httpact.Endpoint{
		Name: name, BaseURL: c.BaseURL, Methods: c.Methods, Paths: c.Paths,
		Timeout: c.Timeout, MaxTimeout: c.MaxTimeout, MaxRequestBody: c.MaxRequestBytes,
		MaxResponseBody: g.cfg.Server.RetainHeadBytes + g.cfg.Server.RetainTailBytes + c.DrainCap,
		AllowPrivate:    c.AllowPrivate, FollowRedirects: c.FollowRedirects,
		HeaderAllow: c.HeaderAllow, HeaderDeny: c.HeaderDeny, ResponseHeaders: c.ResponseHeaders,
		Retry: httpact.RetryPolicy{MaxAttempts: c.MaxAttempts},
		Auth:  httpact.Auth{Kind: c.Auth, User: []byte(c.User), Header: c.Header, Param: c.Param},
	}
	var err1, err2 error
	e.Auth.Token, err1 = secretBytes(c.TokenSecret, values, errs)
	e.Auth.Password, err2 = secretBytes(c.PasswordSecret, values, errs)
	if err := errors.Join(err1, err2); err != nil {
		he.err = fmt.Errorf("endpoint %q: %w", name, err)
		return he
	}
	if err := e.Validate(); err != nil {
		he.err = err
		return he
	}
	he.endpoint = e
	return he
}

// ActiveActions is the number of actions running now.
func (g *Gateway) ActiveActions() int64 { return g.active.Load() }

// Redactor returns the redactor that knows every loaded secret.
func (g *Gateway) Redactor() *Redactor { return g.red }

// Close cancels every running action with ErrShutdown, waits for them to
// stop (each writes its outcome record), then closes connections and files.
func (g *Gateway) Close() error {
	g.cancel(ErrShutdown)
	g.wg.Wait()
	g.http.Close()
	return errors.Join(g.ssh.Close(), g.audit.Close())
}

// ToolResult is what a tool call returns: the structured result, a short
// text for the model, and whether the call failed.
type ToolResult struct {
	Structured any
	Text       string
	IsError    bool
}

// failure is a tool error result that names what went wrong; its text
// passes the redactor like everything else.
func (g *Gateway) failure(format string, args ...any) *ToolResult {
	return &ToolResult{Text: g.red.RedactString(fmt.Sprintf(format, args...)), IsError: true}
}

// begin registers a running action: it takes a slot, starts the action's
// spool and writes the intent record. The returned context is cancelled
// when ctx is, or with ErrShutdown when the gateway closes.
func (g *Gateway) begin(ctx context.Context, intent *AuditRecord) (context.Context, *action, error) {
	release, err := g.limit.acquire(ctx, intent.Target)
	if err != nil {
		return nil, nil, err
	}
	out := g.spool.Begin(intent.Tool, intent.Target)
	intent.Kind, intent.Handle, intent.Decision = "intent", out.Handle(), "allow"
	if err := g.audit.Append(intent); err != nil {
		out.Finish()
		release()
		return nil, nil, fmt.Errorf("refusing to run the action: %w", err)
	}
	actx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	g.wg.Add(1)
	g.active.Add(1)
	a := &action{out: out, start: time.Now(), done: func() {
		stop()
		cancel(nil)
		out.Finish()
		release()
		g.active.Add(-1)
		g.wg.Done()
	}}
	return actx, a, nil
}

// action is one running action.
type action struct {
	out   *ActionOutput
	start time.Time
	done  func()
}

// deny audits a refused call: an intent with the decision and the rule, and
// an outcome that says it did not run.
func (g *Gateway) deny(intent *AuditRecord, status, rule, reason string) {
	intent.Kind, intent.Decision, intent.Rule = "intent", "deny", rule
	if err := g.audit.Append(intent); err != nil {
		g.log.Error("audit log", "error", err)
		return
	}
	outcome := &AuditRecord{Kind: "outcome", Tool: intent.Tool, Target: intent.Target, Status: status, Reason: reason}
	if err := g.audit.Append(outcome); err != nil {
		g.log.Error("audit log", "error", err)
	}
}

// cancelReason turns a cancellation cause into words for the result.
func cancelReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return ""
	case errors.Is(cause, context.Canceled):
		return "cancelled by the client"
	}
	return cause.Error()
}

// TargetNames lists the configured target names, for error messages.
func (g *Gateway) targetNames(ssh bool) []string {
	var names []string
	if ssh {
		for n := range g.sshTargets {
			names = append(names, n)
		}
	} else {
		for n := range g.httpEndpoints {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
