package testenv

import (
	"testing"
)

// Where the Secret Service is missing: the parts, and how to get them.
const (
	secretServicePart = "a Secret Service (gnome-keyring-daemon and dbus-daemon)"
	secretServiceHow  = "install gnome-keyring and dbus-daemon (apt-get install gnome-keyring dbus-daemon), " + Setup
)

// SecretService makes the tests' own Secret Service the one t talks to,
// and returns its D-Bus address: the first call in a test process starts a
// private session bus and an unlocked gnome-keyring on it, in a temporary
// directory of their own (as a person's keyring would be, but with a
// random password that is thrown away), and Main stops both. It sets
// DBUS_SESSION_BUS_ADDRESS for t (t.Setenv), so the keyring calls of the
// test, and the commands it starts with os.Environ, use that keyring and
// never the user's own. Without gnome-keyring-daemon or dbus-daemon (or
// where the OS keyring is not a Secret Service: macOS, Windows) it ends t
// with Missing; if they are installed but fail to start, it fails t.
func SecretService(t testing.TB) string {
	t.Helper()
	needMain(t, "SecretService")
	addr := secretService(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
	return addr
}
