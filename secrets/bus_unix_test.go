//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package secrets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestNoService checks that every call fails fast, with ErrNoService and a
// pointer to the README, whatever the reason there is no Secret Service,
// and that it never autolaunches a bus of its own.
func TestNoService(t *testing.T) {
	old := probeTimeout
	probeTimeout = 500 * time.Millisecond
	t.Cleanup(func() { probeTimeout = old })

	// A dbus-launch on PATH that leaves a mark if anyone runs it.
	bin := t.TempDir()
	mark := filepath.Join(bin, "dbus-launch-ran")
	if err := os.WriteFile(filepath.Join(bin, "dbus-launch"), []byte("#!/bin/sh\ntouch "+mark+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	// A socket that accepts connections and never says a word.
	silent := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	cases := []struct {
		name    string
		address func(t *testing.T) string
		reason  string
	}{
		{"no address", func(t *testing.T) string {
			if _, err := os.Stat(fmt.Sprintf("/run/user/%d/bus", os.Getuid())); err == nil {
				t.Skip("this user has a session bus at /run/user/UID/bus, which godbus finds without an address")
			}
			return ""
		}, "DBUS_SESSION_BUS_ADDRESS is not set"},
		{"no such socket", func(t *testing.T) string {
			return "unix:path=" + filepath.Join(t.TempDir(), "none")
		}, "no such file"},
		{"silent socket", func(*testing.T) string { return "unix:path=" + silent }, "did not answer within"},
		{"bus without a Secret Service", func(t *testing.T) string { return testenv.Bus(t) }, "org.freedesktop.secrets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", c.address(t))
			k := &Keyring{Service: "actiongw-test-noservice"}
			for _, op := range []struct {
				name string
				call func(context.Context) error
			}{
				{"Get", func(ctx context.Context) error { _, err := k.Get(ctx, "x"); return err }},
				{"Set", func(ctx context.Context) error { return k.Set(ctx, "x", []byte("v")) }},
				{"Delete", func(ctx context.Context) error { return k.Delete(ctx, "x") }},
				{"Load", func(ctx context.Context) error { _, err := k.Load(ctx, []string{"x", "y"}); return err }},
				{"Ping", k.Ping},
			} {
				// probeTimeout (set above) must end every call: a hang is
				// the failure, not a slow machine.
				var err error
				testenv.Returns(t, time.Minute, op.name, func() { err = op.call(t.Context()) })
				if !errors.Is(err, ErrNoService) {
					t.Fatalf("%s: got %v; want ErrNoService", op.name, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, c.reason) || !strings.Contains(msg, "#running-a-secret-service-on-a-headless-linux-server") {
					t.Errorf("%s: got %q; want the reason %q and the README section", op.name, msg, c.reason)
				}
			}
		})
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("dbus-launch ran; want no autolaunched bus")
	}
}

// fakeService answers on a bus as org.freedesktop.secrets, badly: it hangs
// on the first call go-keyring makes, or it asks for an unlock prompt that
// never completes.
type fakeService struct {
	hang    bool
	release chan struct{}
	reached chan string // the method the call got stuck in
}

// Get is org.freedesktop.DBus.Properties.Get, which go-keyring calls first
// (for the list of collections).
func (f *fakeService) Get(iface, prop string) (dbus.Variant, *dbus.Error) {
	if f.hang {
		f.reached <- "Get"
		<-f.release
	}
	return dbus.MakeVariant([]dbus.ObjectPath{"/org/freedesktop/secrets/collection/login"}), nil
}

// Unlock is org.freedesktop.Secret.Service.Unlock: it unlocks nothing and
// hands back a prompt.
func (f *fakeService) Unlock(objects []dbus.ObjectPath) ([]dbus.ObjectPath, dbus.ObjectPath, *dbus.Error) {
	return []dbus.ObjectPath{}, "/org/freedesktop/secrets/prompt/1", nil
}

// Prompt is org.freedesktop.Secret.Prompt.Prompt: it shows nothing and
// never sends Completed, like a prompt on a screen nobody looks at.
func (f *fakeService) Prompt(windowID string) *dbus.Error {
	f.reached <- "Prompt"
	return nil
}

func startFakeService(t *testing.T, address string, hang bool) *fakeService {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeService{hang: hang, release: make(chan struct{}), reached: make(chan string, 1)}
	t.Cleanup(func() {
		close(f.release)
		conn.Close()
	})
	for _, e := range []struct {
		path  dbus.ObjectPath
		iface string
	}{
		{"/org/freedesktop/secrets", "org.freedesktop.DBus.Properties"},
		{"/org/freedesktop/secrets", "org.freedesktop.Secret.Service"},
		{"/org/freedesktop/secrets/prompt/1", "org.freedesktop.Secret.Prompt"},
	} {
		if err := conn.Export(f, e.path, e.iface); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := conn.RequestName("org.freedesktop.secrets", dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v, %v", reply, err)
	}
	return f
}

// TestContextEndsAStuckCall checks that a context ends a go-keyring call
// that would wait forever, and (through TestMain's goleak check) that the
// call leaves no goroutine behind.
func TestContextEndsAStuckCall(t *testing.T) {
	for _, c := range []struct {
		name  string
		hang  bool
		stuck string
	}{
		{"service hangs", true, "Get"},
		{"unlock prompt never completes", false, "Prompt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			address := testenv.Bus(t)
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", address)
			f := startFakeService(t, address, c.hang)

			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			var err error
			testenv.Returns(t, time.Minute, "Get with a 300ms context", func() {
				_, err = (&Keyring{Service: "actiongw-test-stuck"}).Get(ctx, "x")
			})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Get: got %v; want context.DeadlineExceeded", err)
			}
			select {
			case got := <-f.reached:
				if got != c.stuck {
					t.Errorf("the call got stuck in %s; want %s", got, c.stuck)
				}
			default:
				t.Errorf("the call never reached %s", c.stuck)
			}
		})
	}
}
