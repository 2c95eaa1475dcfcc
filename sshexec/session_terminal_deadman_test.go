//go:build unix

package sshexec

import (
	"fmt"
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
			p := newPool(t)
			marker := fmt.Sprintf("98702%d", i)
			term, _, _ := startTerminal(t, p, tg, TerminalRequest{Command: "sleep " + marker})
			running := func() bool { return ps(t, direct, target(s), marker) != "" }
			testenv.WaitFor(t, 30*time.Second, "the session's sleep to run", running)
			testenv.WaitFor(t, 30*time.Second, "the watcher to read heartbeats", func() bool { return ps(t, direct, target(s), "head.-c.1") != "" })
			px.cut()
			t.Cleanup(func() { runCmd(t, direct, target(s), "pkill -f 'sleep "+marker+"' || true") })
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
	cs := startCAServer(t)
	cs.RequirePTY(t)
	direct := newPool(t)
	px := startProxy(t, cs.Addr())
	tg := cs.target()
	tg.Port, tg.HostKey, tg.KnownHostsPath, tg.Keepalive = px.port(), cs.Fingerprint(), "", time.Second
	const marker = "987031"
	term, _, _ := startTerminal(t, newPool(t), tg, TerminalRequest{Command: "sleep " + marker})
	running := func() bool { return ps(t, direct, cs.target(), marker) != "" }
	testenv.WaitFor(t, 30*time.Second, "the session's sleep to run", running)
	// Its connection and certificate come after the terminal's: a cut
	// before it reads heartbeats would leave nothing to fire.
	testenv.WaitFor(t, 30*time.Second, "the watcher to read heartbeats", func() bool { return ps(t, direct, cs.target(), "head.-c.1") != "" })
	px.cut()
	t.Cleanup(func() { runCmd(t, direct, cs.target(), "pkill -f 'sleep "+marker+"' || true") })
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
	cs := startCAServer(t)
	cs.RequirePTY(t)
	direct := newPool(t)
	px := startProxy(t, cs.Addr())
	tg := cs.target()
	tg.Port, tg.HostKey, tg.KnownHostsPath, tg.Keepalive = px.port(), cs.Fingerprint(), "", time.Second
	const marker = "987032"
	term, _, _ := startTerminal(t, newPool(t), tg, TerminalRequest{Command: "sleep " + marker})
	running := func() bool { return ps(t, direct, cs.target(), marker) != "" }
	testenv.WaitFor(t, 30*time.Second, "the session's sleep to run", running)
	testenv.WaitFor(t, 30*time.Second, "the watcher's connection", func() bool { return px.connections() == 2 })
	t.Cleanup(func() { runCmd(t, direct, cs.target(), "pkill -f 'sleep "+marker+"' || true") })
	px.cutOne(0) // the terminal's: the watcher's comes once the wrapper reported
	res, _ := term.Wait()
	if res.RemoteStopped == nil || *res.RemoteStopped {
		t.Errorf("remote_stopped %v (%s); want false: no connection could check", res.RemoteStopped, res.Unverified)
	}
	testenv.WaitFor(t, 60*time.Second, "the session's processes to be gone once the stop could not check them",
		func() bool { return !running() })
}
