package auditexport

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestMain stops what the tests started (rsyslogd) and fails the run if a
// goroutine of an Exporter outlived its Close.
func TestMain(m *testing.M) { testenv.Main(m, func() error { return goleak.Find() }) }
