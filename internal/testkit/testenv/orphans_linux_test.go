package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// TestReapOrphans: an orphan of another user that ended (a remote
// command whose sshd session went) is reaped while the tests run; one of
// this process's user is left a zombie, as a child os/exec waits for
// must be.
func TestReapOrphans(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starts a process as another user: needs root")
	}
	orphan := func(t *testing.T, cred *syscall.Credential) int {
		t.Helper()
		// sh starts sleep and exits at once: sleep is an orphan, adopted
		// by this process (Main made it the subreaper), and ends soon.
		cmd := exec.Command("sh", "-c", "sleep 0.5 & echo $!")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	// This user's orphan first; once it is a zombie, another user's: that
	// one's reaping shows a round ran while both were zombies.
	own := orphan(t, nil)
	if !Eventually(time.Minute, func() bool { return proc.Zombie(own) }) {
		t.Fatalf("this user's orphan %d: parent %d, zombie %v; want a zombie of this process", own, proc.Parent(own), proc.Zombie(own))
	}
	other := orphan(t, &syscall.Credential{Uid: 65534, Gid: 65534})
	if !Eventually(time.Minute, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", other)); return err != nil }) {
		t.Errorf("another user's orphan %d (zombie %v, parent %d) was not reaped", other, proc.Zombie(other), proc.Parent(other))
	}
	if !proc.Zombie(own) || proc.Parent(own) != os.Getpid() {
		t.Errorf("this user's orphan %d was reaped: only another user's may be", own)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(own, &ws, 0, nil)
}
