package auditexport_test

import (
	"encoding/json"
	"testing"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/auditexport"
)

// TestSeverity: records a reader of the trail should look at are
// warnings, the rest informational; the statuses and kinds are the
// gateway's and the audit log's own constants, so a renamed one fails
// here. A decision has no constant: "deny" is as the gateway writes it.
func TestSeverity(t *testing.T) {
	tests := []struct {
		name string
		rec  audit.Record
		want int
	}{
		{"allowed", audit.Record{Kind: audit.KindIntent, Decision: "allow"}, auditexport.SeverityInfo},
		{"denied intent", audit.Record{Kind: audit.KindIntent, Decision: "deny"}, auditexport.SeverityWarning},
		{"denied outcome", audit.Record{Kind: audit.KindOutcome, Status: string(gateway.StatusDenied)}, auditexport.SeverityWarning},
		{"interrupted", audit.Record{Kind: audit.KindOutcome, Status: audit.StatusInterrupted}, auditexport.SeverityWarning},
		{"failed", audit.Record{Kind: audit.KindOutcome, Status: string(gateway.StatusFailed)}, auditexport.SeverityInfo},
		{"exited", audit.Record{Kind: audit.KindOutcome, Status: string(gateway.StatusExited)}, auditexport.SeverityInfo},
		{"repair", audit.Record{Kind: audit.KindRepair}, auditexport.SeverityWarning},
		{"key", audit.Record{Kind: audit.KindKey}, auditexport.SeverityInfo},
	}
	for _, tt := range tests {
		line, err := json.Marshal(&tt.rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := auditexport.Severity(line); got != tt.want {
			t.Errorf("%s %s: severity %d; want %d", tt.name, line, got, tt.want)
		}
	}
	if got := auditexport.Severity([]byte("not json")); got != auditexport.SeverityInfo {
		t.Errorf("a line that is not JSON: severity %d; want %d", got, auditexport.SeverityInfo)
	}
}
