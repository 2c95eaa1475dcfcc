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
			px.cut()
			t.Cleanup(func() { runCmd(t, direct, target(s), "pkill -f 'sleep "+marker+"' || true") })
			testenv.WaitFor(t, 60*time.Second, "the session's processes to be gone once its network was cut",
				func() bool { return !running() })
			term.Wait()
		})
	}
}
