package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine may outlive the action or the gateway that started it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
