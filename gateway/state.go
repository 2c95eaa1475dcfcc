package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/redact"
)

// secretRetry is how long a secret that did not load is not looked up
// again: a call that needs it after that reads the keyring anew, so that
// `actiongw secret set` takes effect without a restart, while a burst of
// calls costs one lookup.
const secretRetry = 2 * time.Second

// state is one loaded configuration and what is built from it: the
// targets, ready to use. A call takes the state once, at its start, and
// keeps it to its end (a fan-out's targets are calls of their own: see
// fanTargetNow); a reload publishes a new state and never changes one
// in use, so running actions are not disturbed.
type state struct {
	// cfg is the configuration in effect; nil while broken is set. Its
	// [server] and [audit] sections are always those core was opened with.
	cfg *config.Config
	// broken is why no configuration is in effect: the config could not be
	// loaded at start, or the state directory could not be opened. Every
	// action is refused with it until a reload succeeds.
	broken error
	core   *core // nil while broken is set
	ssh    map[string]*sshTarget
	http   map[string]*httpEndpoint
	// slots are the per-target action slots (max_concurrent); a target
	// without a limit has none.
	slots map[string]chan struct{}
	// known is every secret value loaded since start, for the redactor:
	// a value replaced in the keyring stays redacted.
	known []redact.Secret
	// secretsFailed is set when a secret did not load at loaded; a call
	// that needs a target without its secret loads them again after
	// secretRetry.
	secretsFailed bool
	loaded        time.Time
	// gen numbers the states loaded: a person's answer is for the
	// configuration it was asked under (Question.Key holds it).
	gen uint64
}

// core is what the gateway opens once, from the [server] and [audit]
// sections of the first configuration that loads: the spool, the audit log
// and its export, and the server's action slots. A later change to them
// takes effect at the next start.
type core struct {
	server      config.Server
	auditCfg    config.Audit
	spool       *output.Spool
	audit       *audit.Log // nil when auditBroken is set
	auditBroken error      // why the audit log cannot be written
	// export sends the audit log's lines to syslog; nil when [audit]
	// syslog is not set, or the export could not start.
	export *auditexport.Exporter
	limit  *limiter
	// background are the slots of actions running after their call
	// returned (max_background_actions).
	background slots
}

// state is the configuration in effect now.
func (g *Gateway) state() *state { return g.cur.Load() }

// Reload makes cfg the configuration in effect for the calls that start
// from now on, reading every secret it names again; running actions keep
// the one they started with. loadErr is the error of loading cfg (cfg is
// then ignored): the previous configuration stays in effect, and the next
// tool result says why the new one was not taken. Changes to [server] take
// effect at the next start; the next result says so too.
func (g *Gateway) Reload(ctx context.Context, cfg *config.Config, loadErr error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	note, err := g.loadLocked(ctx, cfg, loadErr)
	switch {
	case err != nil && g.state().broken != nil:
		g.log.Error("the configuration could not be loaded; every action is refused until it is fixed", "error", err)
	case err != nil:
		g.log.Error("the configuration could not be reloaded; the previous one stays in effect", "error", err)
		g.setNote(fmt.Sprintf("The configuration was changed, but the change could not be loaded, so the previous configuration is still in effect: %v", err))
	default:
		// A note of an earlier failed reload is out of date now.
		g.note.Store(nil)
		if note != "" {
			g.log.Warn(note)
			g.setNote(note)
		}
		s := g.state()
		g.log.Info("configuration loaded", "ssh_targets", len(s.ssh), "http_endpoints", len(s.http))
	}
	return err
}

// loadLocked builds a state from cfg and publishes it; g.mu must be held.
// A configuration that cannot be used is an error and changes nothing,
// unless no configuration is in effect yet: then the error itself is
// published, as the reason every action is refused.
func (g *Gateway) loadLocked(ctx context.Context, cfg *config.Config, loadErr error) (note string, err error) {
	old := g.state()
	inEffect := old != nil && old.broken == nil
	fail := func(err error) (string, error) {
		if !inEffect {
			g.cur.Store(&state{broken: err, known: knownOf(old)})
		}
		return "", err
	}
	if loadErr != nil {
		return fail(loadErr)
	}
	// ssh_config took effect as the config loaded (it resolved the
	// targets' aliases); the rest of [server] waits for a restart.
	if inEffect {
		kept := old.core.server
		kept.SSHConfig = cfg.Server.SSHConfig
		if cfg.Server != kept || cfg.Audit != old.core.auditCfg {
			// The spool, the audit log and its export stay as they are:
			// a copy keeps their sections in effect.
			c := *cfg
			c.Server, c.Audit = kept, old.core.auditCfg
			cfg = &c
			note = "The configuration was reloaded, but changes to its [server] and [audit] sections take effect only when the server restarts."
		}
	}
	tg, values, failed := loadTargets(ctx, cfg, g.store, g.ssh, g.log)
	known := knownOf(old)
	for _, v := range values {
		if !slices.ContainsFunc(known, func(k redact.Secret) bool { return k.Name == v.Name && string(k.Value) == string(v.Value) }) {
			known = append(known, v)
		}
	}
	// Published before the core opens: the audit log redacts with it.
	if err := g.publishRedactor(known); err != nil {
		return fail(err)
	}
	g.learnHooks(tg)
	s := &state{cfg: cfg, ssh: tg.ssh, http: tg.http, known: known, secretsFailed: failed, loaded: time.Now(), gen: g.gens.Add(1)}
	if inEffect {
		s.core = old.core
	} else if s.core, err = g.openCore(ctx, cfg); err != nil {
		return fail(err)
	}
	s.slots = map[string]chan struct{}{}
	limits := map[string]int{}
	for name, t := range cfg.SSH {
		limits[name] = t.MaxConcurrent
	}
	for name, e := range cfg.HTTP {
		limits[name] = e.MaxConcurrent
	}
	for name, n := range limits {
		switch {
		case n <= 0:
		case inEffect && cap(old.slots[name]) == n:
			s.slots[name] = old.slots[name] // the calls running hold its slots
		default:
			s.slots[name] = make(chan struct{}, n)
		}
	}
	g.cur.Store(s)
	return note, nil
}

// knownOf is the secrets s knew, for the next state.
func knownOf(s *state) []redact.Secret {
	if s == nil {
		return nil
	}
	return slices.Clone(s.known)
}

// spoolKeepNewest is how many of the newest finished actions, at least,
// stay in the spool past spool_max_bytes (as many as may finish at once,
// max_concurrent_actions, when that is more): a result names its handle
// for reading back, and a cap smaller than one action, or a burst of
// actions finishing together, must not evict it before the agent reads
// it. Each keeps at most retain_head_bytes + retain_tail_bytes per stream.
const spoolKeepNewest = 16

// openCore opens the spool and the audit log under cfg's state directory.
func (g *Gateway) openCore(ctx context.Context, cfg *config.Config) (*core, error) {
	s := cfg.Server
	if err := checkStateDir(s.StateDir); err != nil {
		return nil, err
	}
	spool, err := output.OpenSpool(filepath.Join(s.StateDir, "spool"), output.SpoolOptions{
		TTL: s.SpoolTTL, MaxBytes: s.SpoolMaxBytes, KeepNewest: max(spoolKeepNewest, s.MaxConcurrentActions),
		RetainHeadBytes: s.RetainHeadBytes, RetainTailBytes: s.RetainTailBytes,
		MaxConcurrentReads: s.MaxConcurrentReads,
	})
	if err != nil {
		return nil, err
	}
	// Started first: the records the log writes as it opens are exported
	// too.
	export := startExport(cfg.Audit, g.log)
	auditLog, broken, err := openAudit(ctx, cfg, g.store, g.auditKey, g.redactString, export, g.log)
	if err != nil {
		closeExport(export, g.log)
		return nil, err
	}
	return &core{server: s, auditCfg: cfg.Audit, spool: spool, audit: auditLog, auditBroken: broken, export: export,
		limit: newLimiter(g.log, s.MaxConcurrentActions, s.QueueWait), background: make(slots, s.MaxBackgroundActions)}, nil
}

// refreshed returns s, or when a secret did not load at s and secretRetry
// has passed, the state after reading the keyring again.
func (g *Gateway) refreshed(ctx context.Context, s *state) *state {
	if !s.secretsFailed || time.Since(s.loaded) < secretRetry {
		return s
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state() != s { // reloaded meanwhile
		return g.state()
	}
	if _, err := g.loadLocked(ctx, s.cfg, nil); err != nil {
		g.log.Warn("the secrets could not be read again", "error", err)
		// Not again before secretRetry: the same state, looked up now.
		again := *s
		again.loaded = time.Now()
		g.cur.Store(&again)
	}
	return g.state()
}

// ready returns the state for a call, or the failure that answers it
// while no configuration is in effect.
func (g *Gateway) ready() (*state, *ToolResult) {
	s := g.state()
	if s.broken != nil {
		return nil, g.failure("%v", &BrokenError{s.broken})
	}
	return s, nil
}

// BrokenError is why no configuration is in effect: every action is
// refused with it, and it says how to recover.
type BrokenError struct{ Err error }

func (e *BrokenError) Error() string {
	msg := "The server's configuration cannot be used, so nothing can run:\n" + e.Err.Error() + "\n"
	if !strings.Contains(msg, "actiongw check") {
		msg += "Run `actiongw check` to see every problem. "
	}
	return msg + "The server loads the config file again when it changes, or on SIGHUP: no restart is needed."
}

func (e *BrokenError) Unwrap() error { return e.Err }

// Config returns the configuration in effect, or a *BrokenError when none
// is.
func (g *Gateway) Config() (*config.Config, error) {
	s := g.state()
	if s.broken != nil {
		return nil, &BrokenError{errors.New(g.redactString(s.broken.Error()))}
	}
	return s.cfg, nil
}

// setNote keeps note for the text of the next tool result.
func (g *Gateway) setNote(note string) { g.note.Store(&note) }

// TakeNote returns what the next tool result must tell about the
// configuration (a reload that failed, or that needs a restart), once, if
// the result (size gives its encoded size, called only when there is a
// note) still fits result_bytes with the note and resultAllowance (the
// envelope around the result, a long id, the note's separator); else "",
// keeping it for a later result.
func (g *Gateway) TakeNote(size func() int) string {
	p := g.note.Load()
	if p == nil {
		return ""
	}
	resultBytes := config.Default().Server.ResultBytes
	if c := g.state().core; c != nil {
		resultBytes = c.server.ResultBytes
	}
	note := g.redactString(*p)
	if b, _ := json.Marshal(note); len(b)+size()+resultAllowance > resultBytes || !g.note.CompareAndSwap(p, nil) {
		return ""
	}
	return note
}

// redactString redacts every secret loaded since start from s.
func (g *Gateway) redactString(s string) string { return g.red.Load().RedactString(s) }
