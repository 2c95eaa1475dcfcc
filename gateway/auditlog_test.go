package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/config"
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
