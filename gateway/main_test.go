package gateway

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// No goroutine may outlive the action or the gateway that started it, and
// no process the commands started may outlive the tests.
func TestMain(m *testing.M) {
	testenv.Main(m, func() error { return goleak.Find() })
}
