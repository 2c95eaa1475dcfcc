//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/godbus/dbus/v5"
)

// This file gives go-keyring's Secret Service backend (the one it uses on
// these systems) what its API lacks: a context and a fast, clear failure
// when there is no Secret Service. It uses godbus, go-keyring's own D-Bus
// library, directly.

// probeTimeout bounds the check that a Secret Service answers. A healthy
// one answers in milliseconds; one that is hung would otherwise hold a call
// forever.
var probeTimeout = 10 * time.Second

// probe checks that something answers as the Secret Service on the session
// bus, on a private connection that ctx (or probeTimeout) ends. Unlike
// go-keyring, it never autolaunches a new bus with dbus-launch: a new bus
// would have no unlocked keyring on it.
func probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeoutCause(ctx, probeTimeout,
		fmt.Errorf("the Secret Service did not answer within %v", probeTimeout))
	defer cancel()
	err := ping(pctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("keyring: %w", context.Cause(ctx))
	case pctx.Err() != nil:
		err = context.Cause(pctx)
	}
	return &NoServiceError{err}
}

func ping(ctx context.Context) error {
	conn, err := dbus.SessionBusPrivateNoAutoStartup(dbus.WithContext(ctx))
	if err != nil {
		if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
			return errors.New("DBUS_SESSION_BUS_ADDRESS is not set")
		}
		return err
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		return err
	}
	if err := conn.Hello(); err != nil {
		return err
	}
	// Peer.Ping starts an activatable Secret Service, as go-keyring would.
	return conn.Object("org.freedesktop.secrets", "/org/freedesktop/secrets").
		CallWithContext(ctx, "org.freedesktop.DBus.Peer.Ping", 0).Err
}

// closeShared closes go-keyring's shared session-bus connection, which ends
// a call pending on it and stops the connection's goroutines. go-keyring's
// next call opens a new one.
func closeShared() {
	if conn, err := dbus.SessionBus(); err == nil {
		conn.Close()
	}
}

// isNoService reports whether err is D-Bus saying the Secret Service went
// away or never was.
func isNoService(err error) bool {
	var name string
	var v dbus.Error
	var p *dbus.Error
	switch {
	case errors.As(err, &v):
		name = v.Name
	case errors.As(err, &p):
		name = p.Name
	}
	switch name {
	case "org.freedesktop.DBus.Error.ServiceUnknown",
		"org.freedesktop.DBus.Error.NameHasNoOwner",
		"org.freedesktop.DBus.Error.NoReply",
		"org.freedesktop.DBus.Error.Disconnected":
		return true
	}
	return false
}
