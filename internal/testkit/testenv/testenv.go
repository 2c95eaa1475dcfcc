package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CI reports whether the tests run under CI, where every part must be
// present: the CI variable is set to anything but "", "0" or "false".
func CI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}

// Missing ends t because part is missing here: under CI it fails t, since
// CI must run every test; elsewhere it skips t with "skipped: needs PART:
// HOW", which -v shows, and tells the person at the terminal once per
// `go test` run (see note). part names what is missing ("OpenSSH sshd"),
// how says how to get it.
func Missing(t testing.TB, part, how string) {
	t.Helper()
	msg := "needs " + part + ": " + how
	if CI() {
		t.Fatal("missing under CI: " + msg)
	}
	note(part, how)
	t.Skip("skipped: " + msg)
}

// Setup is how to get every part at once, for the hints.
const Setup = "or run `bash .ci/run` as root, which installs everything and runs the whole suite"

// Root ends t with Missing unless the tests run as root; why, which t
// logs, says what the test does that needs it.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("needs root: " + why)
		Missing(t, "root", "run the tests as root, "+Setup)
	}
}

// Command returns the path of the program name (see LookPath), or ends t
// with Missing, naming pkg, the Debian package that has it.
func Command(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := LookPath(name)
	if err != nil {
		Missing(t, name, "install "+pkg+" (apt-get install "+pkg+"), "+Setup)
	}
	return path
}

// sbinDirs are where Debian puts the system tools the tests run (sshd,
// chpasswd, useradd, nginx, rsyslogd): its PATH for users lacks them, and
// so does root's after a plain su, which keeps the user's PATH.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// LookPath is exec.LookPath that also looks in the sbin directories when
// PATH does not find name, and returns only an absolute path (sshd must be
// started by one: it re-executes itself). The test kits find every system
// program they run with it, so that a PATH without the sbin directories
// skips or fails no test.
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil && filepath.IsAbs(path) {
		return path, nil
	}
	if err == nil {
		err = exec.ErrDot // a relative entry of PATH, with GODEBUG=execerrdot=0
	}
	if !strings.ContainsRune(name, '/') {
		for _, dir := range sbinDirs {
			if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
				return p, nil
			}
		}
	}
	return "", err
}

// Eventually polls cond every few milliseconds until it holds, and reports
// whether it did within d. It is for states no event announces (a process
// gone, a line in a log); d should be far beyond what the state needs, so
// that only a real failure runs out of it on a loaded machine.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// WaitFor is Eventually that fails t, naming what it waited for.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Returns runs f and fails t if f has not returned after d: for a call
// that a mechanism of its own must end (a timeout, a kill), with d far
// beyond that mechanism's bound, so that only a hang trips it. It asserts
// that f ends, not how fast.
func Returns(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// environWithout is os.Environ less the variables named.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}
