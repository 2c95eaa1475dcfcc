package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// Why /dev/tty: `go test ./...` shows a passing package's output only with
// -v, so a skip message alone would go unseen, and a newcomer would take a
// green run for a full one. A test cannot add to go test's summary lines;
// writing to the controlling terminal reaches the person who typed the
// command and nothing else (a pipe, CI's log, an IDE have no terminal, and
// -v already shows every skip with its reason). Several test binaries run
// in one `go test` run, so a file per part in a directory named after the
// go command's process keeps the line to once per run.

var noted sync.Map // part → struct{}: already handled by this process

// note tells the terminal, once per part per `go test` run, that the tests
// needing part were skipped and how to run them. With -v, or without a
// terminal, it says nothing: the skip messages say it.
func note(part, how string) {
	if _, seen := noted.LoadOrStore(part, struct{}{}); seen || testing.Verbose() {
		return
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer tty.Close()
	if !firstInRun(part) {
		return
	}
	fmt.Fprintf(tty, "actiongw tests: skipped the tests that need %s: %s\n", part, how)
}

// firstInRun reports whether no other test process of this `go test` run
// (the parent process, named by pid and start time) has claimed part.
func firstInRun(part string) bool {
	base := filepath.Join(os.TempDir(), fmt.Sprintf("actiongw-testenv-notes-%d", os.Getuid()))
	if err := os.MkdirAll(base, 0o700); err != nil {
		return true
	}
	run := runName(os.Getppid())
	removeFinishedRuns(base, run)
	dir := filepath.Join(base, run)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	sum := sha256.Sum256([]byte(part))
	f, err := os.OpenFile(filepath.Join(dir, hex.EncodeToString(sum[:8])), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// runName names the run of the go command pid: its pid and, where known,
// its start time, so that a reused pid is another run.
func runName(pid int) string {
	if start, err := proc.StartTime(pid); err == nil {
		return fmt.Sprintf("%d.%d", pid, start)
	}
	return strconv.Itoa(pid)
}

// removeFinishedRuns removes the notes of runs whose go command has ended.
func removeFinishedRuns(base, current string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		name := e.Name()
		pid, err := strconv.Atoi(strings.SplitN(name, ".", 2)[0])
		if name == current || err != nil || runName(pid) == name && proc.Alive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(base, name))
	}
}
