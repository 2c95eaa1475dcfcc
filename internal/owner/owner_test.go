package owner

import (
	"fmt"
	"os/exec"
	"testing"
)

func TestAlive(t *testing.T) {
	if !Self().Alive() {
		t.Fatalf("Self() = %q is not alive", Self())
	}
	if Self().Pid() == 0 {
		t.Fatalf("Self() = %q has no pid", Self())
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	child := idOf(cmd.Process.Pid)
	if !child.Alive() {
		t.Errorf("running child %q is not alive", child)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if child.Alive() {
		t.Errorf("reaped child %q is still alive", child)
	}
	// This pid with another start time is another process.
	for _, id := range []ID{"", "0", "x", "-1", ID(fmt.Sprintf("%d.1", Self().Pid()))} {
		if id.Alive() {
			t.Errorf("ID %q is alive; want not", id)
		}
	}
}
