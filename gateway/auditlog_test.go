package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestStartExportNotStarted: an export that is configured but cannot
// start (its CA file gone since the config was checked) is logged, and
// still there for health to show: not connected, its records lost, why.
func TestStartExportNotStarted(t *testing.T) {
	var logs syncbuf.Buffer
	ca := filepath.Join(t.TempDir(), "gone-ca.pem")
	e := startExport(config.Audit{Syslog: "tls://127.0.0.1:6514", SyslogCAFile: ca, SyslogQueueBytes: 1 << 20},
		slog.New(slog.NewJSONHandler(&logs, nil)))
	if e == nil {
		t.Fatal("startExport: nil; want an export that shows it did not start")
	}
	e.Send([]byte(`{"seq":1}`))
	if st := e.Stats(); st.Connected || st.Lost != 1 || !strings.Contains(st.LastError, "gone-ca.pem") {
		t.Errorf("stats %+v; want not connected, 1 lost, the CA file in last_error", st)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"the audit log is not exported to syslog`) {
		t.Errorf("log %s; want an error that the export did not start", logs.String())
	}
	if err := e.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "1 records not sent") {
		t.Errorf("Close: %v; want 1 record not sent", err)
	}
}

// TestAuditKeyHoldsNoScreen: the redactor keeps the audit key out of
// every result, and so holds output while it could be the key's
// beginning. A key NewKey makes holds no screen of numbers or of hex, as
// a session shows them (less's page of seq, a page of sha256sum); a key
// of bare hex digits held the page of seq about one time in three. Nor
// does a screen whose last words begin as the key's prefix does: the
// redactor knows the prefix is public, and lets go where the words part
// from it.
func TestAuditKeyHoldsNoScreen(t *testing.T) {
	var seq, sums strings.Builder
	seq.WriteString("\x1b[?1049h\x1b[H\x1b[2J")
	sums.WriteString(seq.String())
	for i := 24; i <= 46; i++ {
		fmt.Fprintf(&seq, "%d\r\n", i)
		fmt.Fprintf(&sums, "%064x  file%d\r\n", uint64(i)*0x9E3779B97F4A7C15, i)
	}
	seq.WriteString(":\x1b[K")
	sums.WriteString(":\x1b[K")
	for i := range 300 {
		key := audit.NewKey()
		r, err := redact.New([]redact.Secret{{Name: audit.KeyName, Value: key}})
		if err != nil {
			t.Fatal(err)
		}
		for name, screen := range map[string]string{"seq": seq.String(), "sha256sum": sums.String(),
			"git log": "3f9c2e1 audit: the contract, exact\r\n7a1b0c4 docs: actions\r\n(END)"} {
			var shown int
			w := r.NewStream(func(b []byte) { shown += len(b) })
			w.Write([]byte(screen))
			if shown != len(screen) {
				t.Fatalf("key %d: the page of %s is held from byte %d of %d", i, name, shown, len(screen))
			}
		}
	}
}
