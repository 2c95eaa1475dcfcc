package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// Options configure a Gateway.
type Options struct {
	// Config is the configuration to start with; ConfigError, when set, is
	// why there is none (it could not be loaded). The gateway then starts
	// without one and refuses every action with that error until Reload
	// gives it a configuration that loads.
	Config      *config.Config
	ConfigError error
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
// and writes the audit trail. Its configuration and secrets can be
// reloaded while it runs (Reload). It is safe for concurrent use.
type Gateway struct {
	log      *slog.Logger
	store    SecretStore
	auditKey audit.Key // nil without a keyring
	ssh      *sshexec.Pool
	http     *httpact.Client

	mu   sync.Mutex // serializes loads of the configuration
	cur  atomic.Pointer[state]
	red  atomic.Pointer[redact.Redactor] // knows every secret loaded since start
	note atomic.Pointer[string]          // for the next tool result; see TakeNote
	// redMu serializes building red from redKnown, the keyring's secrets
	// (state.known), and learned, what was learned at run time (OAuth2
	// tokens; see learn).
	redMu    sync.Mutex
	redKnown []redact.Secret
	learned  []learned

	actions  registry     // running and recently finished actions, by handle
	sessions sessionCount // open terminal sessions (ssh_session.go)
	feed     atomic.Pointer[Feed]
	// approved holds the exact actions a person approved for a while,
	// under the configuration they were asked under; gens numbers the
	// configurations loaded (state.gen).
	approved remembered
	gens     atomic.Uint64

	ctx    context.Context // cancelled by Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // running actions
	active atomic.Int64
}

// New loads every secret the config references, registers them with the
// redactor, and opens the spool and the audit log under the state
// directory. It always returns a gateway: a secret that cannot be loaded
// makes only the targets that use it fail, with an error that says how to
// store it (and it is looked up again on a later call); a configuration
// that cannot be used, or a state directory that cannot be opened, makes
// every action fail with the reason, until a Reload fixes it.
func New(ctx context.Context, opts Options) *Gateway {
	g := &Gateway{log: opts.Logger, store: opts.Secrets,
		ssh: sshexec.NewPool(opts.Logger), http: httpact.NewClient(opts.Logger)}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.store == nil {
		g.store = &secrets.Keyring{}
	}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	g.auditKey = auditKey(ctx, g.store, g.log)
	st := &state{}
	if g.auditKey != nil {
		st.known = []redact.Secret{{Name: audit.KeyName, Value: g.auditKey}}
	}
	st.broken = errors.New("no configuration loaded yet")
	err := g.publishRedactor(st.known)
	if err != nil {
		// Only a key put in the keyring by hand can be this short.
		_ = g.publishRedactor(nil)
		st.broken = fmt.Errorf("the audit log's key in the keyring (%s) is too short to be kept out of results: %w", audit.KeyName, err)
	}
	g.cur.Store(st)
	if err != nil {
		return g
	}
	g.Reload(ctx, opts.Config, opts.ConfigError)
	return g
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
	if c := g.state().core; c != nil {
		if c.audit != nil {
			err = errors.Join(err, c.audit.Close())
		}
		// After the log: the outcomes of the actions just cancelled go
		// out too.
		closeExport(c.export, g.log)
		c.spool.Close()
	}
	return err
}

// AuditExport returns the counters of the audit log's export to syslog,
// also of one configured that could not start (its LastError says why);
// ok is false when none is configured ([audit] syslog not set) or no
// configuration loaded yet.
func (g *Gateway) AuditExport() (st auditexport.Stats, ok bool) {
	c := g.state().core
	if c == nil || c.export == nil {
		return auditexport.Stats{}, false
	}
	return c.export.Stats(), true
}

// ToolResult is what a tool call returns: the structured result, a short
// text for the model, and whether the call failed.
type ToolResult struct {
	Structured any
	Text       string
	IsError    bool
	// status is how an action that did not start ended (busy, denied,
	// failed...); "" for every other result.
	status Status
}

// failure is a tool error result that names what went wrong; its text
// passes the redactor like everything else. It may quote an argument of
// any size (an unknown target's name, a header's): mcpserver cuts every
// tool error to fit result_bytes.
func (g *Gateway) failure(format string, args ...any) *ToolResult {
	return &ToolResult{Text: g.redactString(fmt.Sprintf(format, args...)), IsError: true}
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

// unknownTarget says that name is no target of kind, and what to call
// instead: otherTool when name is a target of the other kind (under its
// argument otherArg), else one of the names known.
func unknownTarget(kind, name string, known []string, isOther bool, otherTool, otherArg string) string {
	switch {
	case isOther:
		return fmt.Sprintf("%q is not an %s but a target of %s: call %s with %q: %q", name, kind, otherTool, otherTool, otherArg, name)
	case len(known) == 0:
		return fmt.Sprintf("unknown %s %q: none is configured (list_targets shows what is)", kind, name)
	}
	return fmt.Sprintf("unknown %s %q; the configured ones are: %s (see list_targets)", kind, name, strings.Join(known, ", "))
}
