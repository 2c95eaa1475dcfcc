package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/httpact"
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
	tg, redact := loadTargets(ctx, cfg, store, log)
	red, err := NewRedactorList(redact)
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
		sshTargets:    tg.ssh,
		httpEndpoints: tg.http,
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	return g, nil
}

// ActiveActions is the number of actions running now.
func (g *Gateway) ActiveActions() int64 { return g.active.Load() }

// Shutdown cancels every running action with cause, wrapped in
// ErrShutdown, and returns at once; Close waits for them.
func (g *Gateway) Shutdown(cause error) {
	g.cancel(fmt.Errorf("%w: %v", ErrShutdown, cause))
}

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

// cancelReason turns the cause that ended an action into words for the
// result. A shutdown of the gateway names itself even when the action saw
// its session end first.
func (g *Gateway) cancelReason(ctx context.Context) string {
	if g.ctx.Err() != nil {
		return context.Cause(g.ctx).Error()
	}
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return ""
	case errors.Is(cause, context.Canceled):
		return "cancelled by the client"
	case errors.Is(cause, io.EOF):
		return ErrShutdown.Error() + ": the client closed the connection"
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
