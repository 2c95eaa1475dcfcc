//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package testenv

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// These are the systems where go-keyring (and so actiongw) uses the
// Secret Service; the build constraint is secrets/bus_unix.go's.

// keyring is the process's private Secret Service, started by the first
// test that needs it, and again by the next one should it have died (a
// crash of gnome-keyring-daemon fails only the test in flight).
var keyring struct {
	mu     sync.Mutex
	addr   string
	dir    string
	bus    *daemon
	daemon *daemon
}

func secretService(t testing.TB) string {
	t.Helper()
	for _, prog := range []string{"dbus-daemon", "gnome-keyring-daemon"} {
		if _, err := LookPath(prog); err != nil {
			Missing(t, secretServicePart, secretServiceHow)
		}
	}
	keyring.mu.Lock()
	defer keyring.mu.Unlock()
	if keyring.daemon != nil && !keyring.daemon.exited() && !keyring.bus.exited() {
		return keyring.addr
	}
	if keyring.dir != "" {
		t.Log("the tests' Secret Service died; starting a new one")
		stopSecretService()
	}
	if err := startSecretService(); err != nil {
		t.Fatalf("starting the tests' Secret Service: %v", err)
	}
	return keyring.addr
}

func startSecretService() error {
	dir, err := os.MkdirTemp("", "actiongw-keyring-")
	if err != nil {
		return err
	}
	keyring.dir = dir
	for _, d := range []string{"home", "data", "config", "cache", "run"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	keyring.bus, keyring.addr, err = startBus(dir)
	if err != nil {
		return err
	}
	// --unlock reads the password from stdin and creates the "login"
	// keyring with it; the password is thrown away.
	password := make([]byte, 24)
	rand.Read(password)
	bin, err := LookPath("gnome-keyring-daemon")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--foreground", "--unlock", "--components=secrets",
		"--control-directory="+filepath.Join(dir, "run", "keyring"))
	cmd.Env = append(environWithout("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"),
		"HOME="+filepath.Join(dir, "home"), "XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"), "DBUS_SESSION_BUS_ADDRESS="+keyring.addr)
	cmd.Stdin = strings.NewReader(hex.EncodeToString(password))
	d, err := startDaemon(cmd)
	if err != nil {
		return fmt.Errorf("gnome-keyring-daemon: %w", err)
	}
	keyring.daemon = d
	conn, err := dbus.Connect(keyring.addr)
	if err != nil {
		return fmt.Errorf("connecting to the tests' bus: %w", err)
	}
	defer conn.Close()
	owned := func() bool {
		var has bool
		return conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, "org.freedesktop.secrets").Store(&has) == nil && has
	}
	if !Eventually(30*time.Second, func() bool { return owned() || d.exited() }) || !owned() {
		return fmt.Errorf("gnome-keyring-daemon did not take the Secret Service name; its log:\n%s", d.log.String())
	}
	return nil
}

func stopSecretService() error {
	if keyring.dir == "" {
		return nil
	}
	err := errors.Join(keyring.daemon.stop(), keyring.bus.stop())
	os.RemoveAll(keyring.dir)
	keyring.dir, keyring.daemon, keyring.bus = "", nil, nil
	return err
}

// Bus starts a private D-Bus session bus with nothing on it (no service
// activation either), stopped at t's cleanup, and returns its address.
// Without dbus-daemon it ends t with Missing.
func Bus(t testing.TB) string {
	t.Helper()
	if _, err := LookPath("dbus-daemon"); err != nil {
		// The same line as SecretService's: the same packages fix both.
		Missing(t, secretServicePart, secretServiceHow)
	}
	d, addr, err := startBus(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Error(err)
		}
	})
	return addr
}

// startBus runs a dbus-daemon listening in dir, and returns once it
// listens. The bus activates no service, so only what the tests start can
// answer on it.
func startBus(dir string) (*daemon, string, error) {
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	err := os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+sock+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o600)
	if err != nil {
		return nil, "", err
	}
	bin, err := LookPath("dbus-daemon")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--nofork", "--nopidfile", "--nosyslog", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	d, err := startDaemon(cmd)
	if err != nil {
		return nil, "", fmt.Errorf("dbus-daemon: %w", err)
	}
	// The address line comes once the bus listens.
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		d.stop()
		return nil, "", fmt.Errorf("dbus-daemon did not start: %v\n%s", err, d.log.String())
	}
	return d, "unix:path=" + sock, nil
}

// daemon is a process the tests started and stop.
type daemon struct {
	cmd      *exec.Cmd
	log      *syncbuf.Buffer
	done     chan struct{}
	stopping atomic.Bool
}

func startDaemon(cmd *exec.Cmd) (*daemon, error) {
	d := &daemon{cmd: cmd, log: &syncbuf.Buffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil { // StdoutPipe sets it
		cmd.Stdout = d.log
	}
	cmd.Stderr = d.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := cmd.Wait()
		if !d.stopping.Load() {
			// Every later test that needs it fails: say why, once.
			fmt.Fprintf(os.Stderr, "testenv: %s exited while the tests ran (%v); its log:\n%s\n", filepath.Base(cmd.Path), err, d.log)
		}
		close(d.done)
	}()
	return d, nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop ends the daemon with SIGTERM, and SIGKILL after 5 s.
func (d *daemon) stop() error {
	if d == nil {
		return nil
	}
	d.stopping.Store(true)
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	d.cmd.Process.Kill()
	<-d.done
	return fmt.Errorf("%s did not stop on SIGTERM within 5 s; killed", filepath.Base(d.cmd.Path))
}
