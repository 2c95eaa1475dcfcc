//go:build !((dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd)

package testenv

import "testing"

// Here the OS keyring is not a Secret Service (macOS Keychain, Windows
// Credential Manager), and the tests must not touch the user's own.
func secretService(t testing.TB) string {
	t.Helper()
	Missing(t, secretServicePart, "the keyring tests run on Linux and the BSDs, where the OS keyring is a Secret Service")
	return ""
}

func stopSecretService() error { return nil }

// Bus ends t with Missing: D-Bus is the Secret Service's transport, which
// this system's keyring does not use.
func Bus(t testing.TB) string {
	t.Helper()
	Missing(t, secretServicePart, "the keyring tests run on Linux and the BSDs, where the OS keyring is a Secret Service")
	return ""
}
