package testenv

import (
	"fmt"
	"os"
	"strings"
	"syscall"

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
