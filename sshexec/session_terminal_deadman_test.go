//go:build unix

package sshexec

import (
	"fmt"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
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
			term, out, _ := startTerminal(t, p, tg, TerminalRequest{Command: "sleep " + marker})
			deadline := time.Now().Add(30 * time.Second)
			for ps(t, direct, target(s), marker) == "" {
				if time.Now().After(deadline) {
					t.Fatalf("the session's sleep never ran: %q", out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			px.cut()
			deadline = time.Now().Add(60 * time.Second)
			for left := ps(t, direct, target(s), marker); left != ""; left = ps(t, direct, target(s), marker) {
				if time.Now().After(deadline) {
					runCmd(t, direct, target(s), "pkill -f 'sleep "+marker+"'")
					t.Fatalf("the session's processes outlived its network: %s", left)
				}
				time.Sleep(200 * time.Millisecond)
			}
			term.Wait()
		})
	}
}
