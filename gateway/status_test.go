package gateway

import (
	"slices"
	"testing"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/sshexec"
)

// TestLowerStatusesAreStatuses: every way sshexec and httpact say a run or
// a request ended is, converted, one of the gateway's statuses, which the
// tools' results and list_actions name: no status is lost on the way up.
func TestLowerStatusesAreStatuses(t *testing.T) {
	known := []Status{StatusExited, StatusSignaled, StatusOutputLimit, StatusOK, StatusHTTPError, StatusBodyLimit,
		StatusSizeLimit, StatusTimeout, StatusCancelled, StatusFailed, StatusRunning, StatusDenied, StatusBusy, StatusDone}
	for _, s := range []sshexec.Status{sshexec.StatusExited, sshexec.StatusSignaled, sshexec.StatusTimeout,
		sshexec.StatusCancelled, sshexec.StatusOutputLimit, sshexec.StatusFailed} {
		if !slices.Contains(known, Status(s)) {
			t.Errorf("sshexec's %q is no status of the gateway", s)
		}
	}
	for _, s := range []httpact.Status{httpact.StatusOK, httpact.StatusHTTPError, httpact.StatusBodyLimit,
		httpact.StatusCancelled, httpact.StatusTimeout, httpact.StatusFailed} {
		if !slices.Contains(known, Status(s)) {
			t.Errorf("httpact's %q is no status of the gateway", s)
		}
	}
	if Status(httpact.StatusTimeout) != StatusTimeout || Status(httpact.StatusCancelled) != StatusCancelled || Status(httpact.StatusFailed) != StatusFailed {
		t.Errorf("httpact says timeout, cancelled or failed in other words than sshexec")
	}
}
