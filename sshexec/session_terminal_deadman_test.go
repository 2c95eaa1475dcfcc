//go:build unix

package sshexec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestTerminalDeadManSwitch cuts the network under a terminal session
// (nothing arrives and nothing closes, as when the gateway's host is
// suspended): the terminal's shell gets no hang-up, so only the
// session's watcher can stop what it runs, and it must, once the
// heartbeats stop.
func TestTerminalDeadManSwitch(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	s.RequirePTY(t)
	direct := newPool(t)
	for i, sub := range []bool{true, false} {
		t.Run(fmt.Sprintf("subreaper=%v", sub), func(t *testing.T) {
			tg, px := viaProxy(t, s)
			tg.noSubreaper = !sub
			term, running := watchedSleep(t, tg, direct, target(s), fmt.Sprintf("98702%d", i))
			px.cut()
			testenv.WaitFor(t, 60*time.Second, "the session's processes to be gone once its network was cut",
				func() bool { return !running() })
			term.Wait()
		})
	}
}

// TestTerminalDeadManSwitchCA is TestTerminalDeadManSwitch on a CA target,
// where the watcher runs on a connection of its own, under a certificate
// for its script alone: the cut takes both connections, and no new one
// can be made, so the watcher, not the gateway's stop, must end the
// session's processes.
func TestTerminalDeadManSwitchCA(t *testing.T) {
	cs, tg, px := caViaProxy(t)
	term, running := watchedSleep(t, tg, newPool(t), cs.target(), "987031")
	px.cut()
	testenv.WaitFor(t, 60*time.Second, "the session's processes to be gone once its network was cut",
		func() bool { return !running() })
	term.Wait()
}

// TestTerminalWatcherFiresUnverified cuts the connection of a CA target's
// terminal alone, and lets no new one be made: the gateway sees the
// session end but cannot stop or check its processes, which the server,
// seeing nothing close, leaves running. The watcher, on its own connection
// still up, must not stand down then: it fires, and they are gone.
func TestTerminalWatcherFiresUnverified(t *testing.T) {
	cs, tg, px := caViaProxy(t)
	term, running := watchedSleep(t, tg, newPool(t), cs.target(), "987032")
	if n := px.connections(); n != 2 {
		t.Fatalf("%d connections through the proxy; want the terminal's and the watcher's", n)
	}
	px.cutOne(0) // the terminal's: the watcher's comes once the wrapper reported
	res, _ := term.Wait()
	if res.RemoteStopped == nil || *res.RemoteStopped {
		t.Errorf("remote_stopped %v (%s); want false: no connection could check", res.RemoteStopped, res.Unverified)
	}
	testenv.WaitFor(t, 60*time.Second, "the session's processes to be gone once the stop could not check them",
		func() bool { return !running() })
}

// TestTerminalWatcherNotArmed: a terminal whose watcher cannot be
// started (on a CA target it needs a connection of its own, and none can
// be made) never runs its program, which would outlive a network cut
// unwatched: the gateway ends the session and says why, and the wrapper,
// which no stop can reach either, gives up by itself.
func TestTerminalWatcherNotArmed(t *testing.T) {
	cs, tg, px := caViaProxy(t)
	px.refuseAfter(1) // the terminal's
	dir := cs.UserDir(t)
	term, _, _ := startTerminal(t, newPool(t), tg, TerminalRequest{Command: "echo ran > " + dir + "/ran; sleep 987033"})
	res, _ := term.Wait()
	if res.Status != StatusCancelled || !strings.Contains(res.Reason, "dead-man switch could not be armed") {
		t.Errorf("status %s (%s); want cancelled, the dead-man switch named", res.Status, res.Reason)
	}
	direct := newPool(t)
	testenv.WaitFor(t, 2*watcherArmWait, "the wrapper to give up waiting for its watcher",
		func() bool { return ps(t, direct, cs.target(), "987033") == "" })
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the program ran without a watcher (%v)", err)
	}
}

// caViaProxy is a CA server and a target on it through a new proxy, as
// viaProxy's.
func caViaProxy(t *testing.T) (*caServer, *Target, *proxy) {
	cs := startCAServer(t)
	cs.RequirePTY(t)
	px := startProxy(t, cs.Addr())
	tg := cs.target()
	tg.Port, tg.HostKey, tg.KnownHostsPath, tg.Keepalive = px.port(), cs.Fingerprint(), "", time.Second
	return cs, tg, px
}

// watchedSleep starts a terminal session on tg that runs `sleep marker`
// and returns once the sleep runs and the session's watcher reads
// heartbeats (a cut before would leave nothing to fire: on a CA target
// its connection and certificate come after the terminal's), with a
// check, through direct on psTarget, that the sleep still runs. A
// cleanup kills what is left.
func watchedSleep(t *testing.T, tg *Target, direct *Pool, psTarget *Target, marker string) (*Terminal, func() bool) {
	t.Helper()
	term, _, _ := startTerminal(t, newPool(t), tg, TerminalRequest{Command: "sleep " + marker})
	running := func() bool { return ps(t, direct, psTarget, marker) != "" }
	testenv.WaitFor(t, 30*time.Second, "the session's sleep to run", running)
	testenv.WaitFor(t, 30*time.Second, "the watcher to read heartbeats", func() bool { return ps(t, direct, psTarget, "head.-c.1") != "" })
	t.Cleanup(func() { runCmd(t, direct, psTarget, "pkill -f 'sleep "+marker+"' || true") })
	return term, running
}
