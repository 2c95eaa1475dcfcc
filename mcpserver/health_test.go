package mcpserver

import (
	"testing"

	"github.com/actiongw/actiongw/internal/auditexport"
)

func TestExportText(t *testing.T) {
	tests := []struct {
		name string
		st   auditexport.Stats
		want string
	}{
		{"well", auditexport.Stats{Sent: 12, Connected: true},
			"Audit export to syslog: connected, 12 sent, 0 dropped, 0 lost, 0 queued."},
		{"down", auditexport.Stats{Sent: 12, Dropped: 2, Lost: 1, Queued: 3, LastError: "dial tcp 10.0.0.5:6514: connect: connection refused"},
			"Audit export to syslog: not connected, 12 sent, 2 dropped, 1 lost, 3 queued; the last error was: dial tcp 10.0.0.5:6514: connect: connection refused." +
				" The local audit log has every record; the export's drops and losses are logged on serve's stderr, not in audit.jsonl."},
	}
	for _, tt := range tests {
		if got := exportText(tt.st); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}
