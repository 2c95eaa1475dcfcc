package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// Options configure a Gateway.
type Options struct {
	Config *config.Config
	// Secrets is where referenced secrets are read; nil means the OS
	// keyring under service "actiongw".
	Secrets SecretStore
	Logger  *slog.Logger
}

// ErrShutdown is the cancellation cause of actions still running when the
// gateway closes.
var ErrShutdown = errors.New("server shutting down")

// Gateway runs actions: it checks policy, injects credentials, runs the
// action with its output going through redacting captures into the spool,
// and writes the audit trail. It is safe for concurrent use.
type Gateway struct {
	cfg   *config.Config
	log   *slog.Logger
	red   *redact.Redactor
	spool *output.Spool
	audit *audit.Log // nil when auditBroken is set
	// auditBroken is why the audit log cannot be written (damaged, or its
	// key is missing): every action is refused with it.
	auditBroken error
	ssh         *sshexec.Pool
	http        *httpact.Client
	limit       *limiter

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
	if store == nil {
		store = &secrets.Keyring{}
	}
	tg, known := loadTargets(ctx, cfg, store, log)
	key := auditKey(ctx, store, log)
	if key != nil {
		known = append(known, redact.Secret{Name: audit.KeyName, Value: key})
	}
	red, err := redact.New(known)
	if err != nil {
		return nil, err
	}
	s := cfg.Server
	if err := checkStateDir(s.StateDir); err != nil {
		return nil, err
	}
	spool, err := output.OpenSpool(filepath.Join(s.StateDir, "spool"), output.SpoolOptions{
		TTL: s.SpoolTTL, MaxBytes: s.SpoolMaxBytes,
		RetainHeadBytes: s.RetainHeadBytes, RetainTailBytes: s.RetainTailBytes,
		MaxConcurrentReads: s.MaxConcurrentReads,
	})
	if err != nil {
		return nil, err
	}
	auditLog, broken, err := openAudit(ctx, cfg, store, key, red.RedactString, log)
	if err != nil {
		return nil, err
	}
	perTarget := map[string]int{}
	for name, t := range cfg.SSH {
		perTarget[name] = t.MaxConcurrent
	}
	for name, e := range cfg.HTTP {
		perTarget[name] = e.MaxConcurrent
	}
	g := &Gateway{
		cfg: cfg, log: log, red: red, spool: spool, audit: auditLog, auditBroken: broken,
		ssh: sshexec.NewPool(log), http: httpact.NewClient(log),
		limit:         newLimiter(log, s.MaxConcurrentActions, perTarget, s.QueueWait),
		sshTargets:    tg.ssh,
		httpEndpoints: tg.http,
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	return g, nil
}

// checkStateDir creates the state directory (mode 0700) or refuses one that
// others may write: whoever can write there can replace the audit log or
// the spool under the server.
func checkStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("state directory %s is writable by other users (mode %04o): they could rewrite the audit log or the spool; make it private with: chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
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
	err := g.ssh.Close()
	if g.audit != nil {
		err = errors.Join(err, g.audit.Close())
	}
	return err
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

// names lists the keys of a target map, sorted, for error messages.
func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
