package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/secrets"
)

// auditKey returns the key of the audit chain, kept in store under
// audit.KeyName and made there at the first start. Without a keyring it
// returns nil: the log is then written unkeyed, and `audit verify` says
// what that cannot prove.
func auditKey(ctx context.Context, store SecretStore, log *slog.Logger) audit.Key {
	v, err := store.Get(ctx, audit.KeyName)
	var nf *secrets.NotFoundError
	switch {
	case err == nil:
		return audit.Key(v.Reveal())
	case errors.As(err, &nf):
		key := audit.NewKey()
		if err := store.Set(ctx, audit.KeyName, key); err != nil {
			log.Warn("the audit log's key could not be stored in the keyring; the log is written without one", "error", err)
			return nil
		}
		log.Info("made the audit log's key and stored it in the keyring", "item", audit.KeyName)
		return key
	}
	log.Warn("the audit log's key could not be read from the keyring; the log is written without one, and a rewrite of it cannot be detected", "error", err)
	return nil
}

// startExport starts the export of the audit log that [audit] asks for,
// if any. One that cannot start is logged, not fatal: the local log is
// the durable record, and actions go on without the copy. It is then an
// auditexport.NotStarted, so that health shows it not connected, its
// records lost, and why.
func startExport(a config.Audit, log *slog.Logger) *auditexport.Exporter {
	if a.Syslog == "" {
		return nil
	}
	cfg, err := exportConfig(a, log)
	var e *auditexport.Exporter
	if err == nil {
		e, err = auditexport.New(cfg)
	}
	if err != nil {
		log.Error("the audit log is not exported to syslog: the export could not start; its records count as lost in health", "error", err)
		addr := cfg.Addr
		if addr == "" { // not quoted: a mistyped value could hold anything
			addr = "[audit] syslog"
		}
		return auditexport.NotStarted(addr, err)
	}
	return e
}

// exportConfig is the exporter's configuration from [audit]: the
// receiver's address and, for tls://, what verifies its certificate.
func exportConfig(a config.Audit, log *slog.Logger) (auditexport.Config, error) {
	addr, useTLS, err := a.SyslogAddr()
	cfg := auditexport.Config{Addr: addr, QueueBytes: a.SyslogQueueBytes, Logger: log}
	if err == nil && useTLS {
		cfg.TLS = &tls.Config{ServerName: a.SyslogServerName}
		if cfg.TLS.ServerName == "" {
			cfg.TLS.ServerName, _, _ = net.SplitHostPort(addr)
		}
		if a.SyslogCAFile != "" {
			cfg.TLS.RootCAs, err = httpact.LoadCAFile(a.SyslogCAFile)
		}
	}
	return cfg, err
}

// exportFlush bounds how long a closing gateway waits for the audit
// export to send what is queued.
const exportFlush = 5 * time.Second

// closeExport stops e, after it sent what is queued or exportFlush
// passed.
func closeExport(e *auditexport.Exporter, log *slog.Logger) {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), exportFlush)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		log.Warn("the audit export stopped with records unsent", "error", err)
	}
}

// checkpointTimeout bounds one save of the audit checkpoint.
const checkpointTimeout = 5 * time.Second

// openAudit opens the audit log of cfg, keyed, and checked against the
// checkpoint kept in store. A damaged log, or a keyed one whose key is
// missing, is returned as broken, not as an error: the server starts and
// refuses every action with it, which names the way out. At start, the
// intents of actions whose server died get an outcome "interrupted".
func openAudit(ctx context.Context, cfg *config.Config, store SecretStore, key audit.Key, redact func(string) string, export *auditexport.Exporter, log *slog.Logger) (l *audit.Log, broken, err error) {
	opts := audit.Options{Redact: redact, Key: key, RotateBytes: cfg.Server.AuditRotateBytes, Logger: log}
	if export != nil {
		opts.Written = export.Send
	}
	if key != nil {
		name := audit.CheckpointName(cfg.Server.StateDir)
		if v, err := store.Get(ctx, name); err == nil {
			var cp audit.Checkpoint
			if err := cp.UnmarshalText(v.Reveal()); err != nil {
				log.Warn("the audit checkpoint in the keyring is unreadable; the log is opened without it", "item", name, "error", err)
			} else {
				opts.Checkpoint = &cp
			}
		}
		opts.SaveCheckpoint = func(cp audit.Checkpoint) {
			b, _ := cp.MarshalText()
			sctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
			defer cancel()
			if err := store.Set(sctx, name, b); err != nil {
				log.Warn("the audit checkpoint could not be saved in the keyring", "item", name, "error", err)
			}
		}
	}
	l, err = audit.OpenWith(ctx, audit.Path(cfg.Server.StateDir), opts)
	var damaged *audit.DamagedError
	switch {
	case errors.As(err, &damaged), errors.Is(err, audit.ErrNoKey):
		log.Error("the audit log cannot be used; every action is refused until it is repaired", "error", err)
		return nil, err, nil
	case err != nil:
		return nil, nil, err
	}
	recs, err := l.RecordInterrupted()
	for _, r := range recs {
		log.Warn("an action of a server that died is recorded as interrupted", "handle", r.Handle, "tool", r.Tool, "target", r.Target)
	}
	if err != nil {
		log.Error("the interrupted actions could not all be recorded", "error", err)
	}
	return l, nil, nil
}
