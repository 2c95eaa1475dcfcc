//go:build !((dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd)

package secrets

import "context"

// On macOS and Windows go-keyring calls the system keyring directly: there
// is no bus to probe, no shared connection to close, and no D-Bus error.

func probe(context.Context) error { return nil }

func closeShared() {}

func isNoService(error) bool { return false }
