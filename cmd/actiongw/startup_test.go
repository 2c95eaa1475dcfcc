//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
	"github.com/actiongw/actiongw/secrets"
)

// history writes into state what a serve that ran actions actions and
// has ended leaves: their intent and outcome records in the audit log,
// keyed with the key in kr and checkpointed there as serve does, and the
// output of the last spooled of them in the spool, in the directory of a
// process that no longer runs.
func history(tb testing.TB, state string, kr *secrets.Keyring, actions, spooled int) {
	tb.Helper()
	ctx := context.Background()
	v, err := kr.Get(ctx, audit.KeyName)
	if err != nil {
		tb.Fatal(err)
	}
	cpName := audit.CheckpointName(state)
	l, err := audit.OpenWith(ctx, audit.Path(state), audit.Options{Key: audit.Key(v.Reveal()), RotateBytes: 64 << 20,
		SaveCheckpoint: func(cp audit.Checkpoint) {
			b, _ := cp.MarshalText()
			if err := kr.Set(ctx, cpName, b); err != nil {
				tb.Error(err)
			}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	// Appends that arrive together share a commit: 256 at a time.
	var wg sync.WaitGroup
	work := make(chan int)
	for range 256 {
		wg.Go(func() {
			for i := range work {
				h := output.NewHandle()
				code := 0
				for _, r := range []*audit.Record{
					{Kind: audit.KindIntent, Handle: h, Tool: "ssh_exec", Target: "box", Command: fmt.Sprintf("journalctl -u app --since -%dm | tail -n 20000", i%60), Decision: "allow"},
					{Kind: audit.KindOutcome, Handle: h, Tool: "ssh_exec", Target: "box", Status: "exited", ExitCode: &code, DurationMS: 12,
						Streams: map[string]audit.Stream{"stdout": {Bytes: 1 << 20, SHA256: fmt.Sprintf("%064x", i)}, "stderr": {}}},
				} {
					if err := l.Append(r); err != nil {
						tb.Error(err)
						return
					}
				}
			}
		})
	}
	for i := range actions {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}

	dir := filepath.Join(state, "spool")
	sp, err := output.OpenSpool(dir, output.SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 8 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	work = make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				a := sp.Begin("ssh_exec", "box")
				a.Capture("stdout", nil, output.Limits{HeadBytes: 4096, TailBytes: 4096}).Write(fmt.Appendf(nil, "line %d\n", i))
				a.Capture("stderr", nil, output.Limits{HeadBytes: 4096, TailBytes: 4096})
				a.Finish()
			}
		})
	}
	for i := range spooled {
		work <- i
	}
	close(work)
	wg.Wait()
	sp.Close()
	// Its process has ended: a pid above the kernel's limit never runs.
	own, err := filepath.Glob(filepath.Join(dir, "owner-*"))
	if err != nil || len(own) != 1 {
		tb.Fatalf("spool owner directories %q, %v", own, err)
	}
	if err := os.Rename(own[0], filepath.Join(dir, "owner-99999999")); err != nil {
		tb.Fatal(err)
	}
}

// serveStart starts `actiongw serve` on cfg and returns how long it took
// to answer initialize.
func serveStart(tb testing.TB, cfg string, env []string) time.Duration {
	tb.Helper()
	cmd := exec.Command(actiongwBinary(tb), "serve", "-config", cfg)
	cmd.Env = env
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	client, err := mcphost.Start(context.Background(), cmd, mcphost.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.Initialize(ctx); err != nil {
		tb.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	return time.Since(start)
}

// startupConfigs makes two state directories, one empty and one with the
// history of actions past actions (spooled of them in the spool), and a
// config for each; it returns them and serve's environment.
func startupConfigs(tb testing.TB, actions, spooled int) (empty, full string, env []string) {
	tb.Helper()
	testenv.SecretService(tb)
	service := "actiongw-test-" + randomHex(tb, 6)
	kr := &secrets.Keyring{Service: service}
	ctx := context.Background()
	if err := kr.Set(ctx, audit.KeyName, audit.NewKey()); err != nil {
		tb.Fatal(err)
	}
	cfg := func(state string) string {
		cfg := filepath.Join(tb.TempDir(), "config.toml")
		text := fmt.Sprintf("[server]\nstate_dir = %q\n[http.api]\nbase_url = \"http://127.0.0.1:9\"\nallow_private = true\n", state)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { kr.Delete(ctx, audit.CheckpointName(state)) })
		return cfg
	}
	fullState := tb.TempDir()
	start := time.Now()
	history(tb, fullState, kr, actions, spooled)
	tb.Logf("%d past actions (%d spooled) written in %v", actions, spooled, time.Since(start).Round(time.Millisecond))
	tb.Cleanup(func() { kr.Delete(ctx, audit.KeyName) })
	return cfg(tb.TempDir()), cfg(fullState), append(os.Environ(), "ACTIONGW_KEYRING_SERVICE="+service)
}

// BenchmarkServeStart is how long serve takes to answer initialize on an
// empty state directory and on one with 100,000 past actions (their audit
// records, and the spool the default spool_max_bytes holds of them), the
// two started in turn in one run; ratio is the second over the first
// (goal <= 1.5).
func BenchmarkServeStart(b *testing.B) {
	empty, full, env := startupConfigs(b, 100_000, 80_000)
	serveStart(b, empty, env) // the binary built and cached
	var le, lf latencies
	for b.Loop() {
		le = append(le, serveStart(b, empty, env))
		lf = append(lf, serveStart(b, full, env))
	}
	le.report(b, "empty-")
	lf.report(b, "history-")
	slices.Sort(le)
	slices.Sort(lf)
	b.ReportMetric(float64(lf[len(lf)/2])/float64(le[len(le)/2]), "ratio")
}
