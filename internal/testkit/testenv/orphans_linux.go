package testenv

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// adoptOrphans makes this process the reaper of every orphan below it, so
// that a process the tests started stays below it after its parent ends:
// a remote command whose sshd session was killed, a daemon that forked.
// A check by user could not tell this package's processes from those of
// another package's tests running at the same time.
func adoptOrphans() bool {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
}

// reapEvery is how often reapOrphans looks for zombies to reap.
const reapEvery = time.Second

// reapOrphans reaps, every reapEvery until stop is called, the zombies
// this process adopted that it did not start: those of another user, a
// remote command of a test user whose sshd session ended. Unreaped, they
// fill the process table in a long run (a soak of thousands of actions
// took every pid). This process's own children, which os/exec waits for,
// run as its user and are left alone; so are orphans of its own user,
// which stay zombies until the run ends. It runs on a timer, not on a
// goroutine of its own, which tests that check for leaked goroutines
// would see; stop waits for a round under way.
func reapOrphans() (stop func()) {
	self, uid := os.Getpid(), os.Getuid()
	var mu sync.Mutex // held by a round, and by stop
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before the first round reads it
	defer mu.Unlock()
	t = time.AfterFunc(reapEvery, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, pid := range proc.Children(self) {
			if u, err := proc.UID(pid); err == nil && u != uid && proc.Zombie(pid) {
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			}
		}
		t.Reset(reapEvery)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// noneLeft reports, and kills, the processes below this one that are still
// running after the tests (zombies do not count: they have ended).
func noneLeft() error {
	var left []int
	Eventually(leftoverGrace, func() bool {
		left = left[:0]
		for _, pid := range proc.Descendants(os.Getpid()) {
			if proc.Alive(pid) {
				left = append(left, pid)
			}
		}
		return len(left) == 0
	})
	if len(left) == 0 {
		return nil
	}
	var b strings.Builder
	for _, pid := range left {
		fmt.Fprintf(&b, "\n\t%d %s", pid, proc.Command(pid))
	}
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return fmt.Errorf("%d process(es) the tests started still ran %v after them (now killed):%s", len(left), leftoverGrace, b.String())
}
