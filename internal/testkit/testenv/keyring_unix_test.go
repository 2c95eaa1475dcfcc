//go:build linux

package testenv

import (
	"context"
	"testing"

	"github.com/actiongw/actiongw/secrets"
)

// TestSecretServiceRestarts kills the tests' gnome-keyring-daemon: the next
// test that needs a Secret Service gets a new one.
func TestSecretServiceRestarts(t *testing.T) {
	use := func(t *testing.T) {
		SecretService(t)
		kr := &secrets.Keyring{Service: "actiongw-testenv"}
		if err := kr.Set(context.Background(), "probe", []byte("value")); err != nil {
			t.Fatalf("keyring: %v", err)
		}
	}
	t.Run("first", use)
	keyring.mu.Lock()
	d := keyring.daemon
	keyring.mu.Unlock()
	if d == nil { // "first" skipped, saying why, or failed
		t.Skip("skipped: no Secret Service was started, so none can be killed")
	}
	d.stopping.Store(true) // killed on purpose: no diagnostic
	d.cmd.Process.Kill()
	<-d.done
	t.Run("after the daemon died", use)
}
