//go:build unix

package sshtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// SudoUser is the account EnableSudo lets run anything as root with its
// password; it is separate from User and PasswordUser, whose settings
// other tests change.
const SudoUser = "actiongw-sudo"

// sudoPasswordFile keeps SudoUser's password for every test process of a
// run (the packages' tests run in parallel); only root reads it. Another
// shell's account keeps its own, in this name and "-" and the account's.
const sudoPasswordFile = "/run/actiongw-test-sudo-password"

// EnableSudo makes SudoUser able to run any command as root with sudo,
// with a password (no cached credentials are relied on), and returns the
// account and its password. It needs root, sudo and the account (see
// EnsureUser); without them it ends t with testenv.Missing.
func EnableSudo(t testing.TB) (string, []byte) {
	t.Helper()
	return EnableSudoShell(t, "")
}

// EnableSudoShell is EnableSudo for an account whose login shell is shell
// (see Options.Shell): "actiongw-sudo-" and the shell's file name, or
// SudoUser for "".
func EnableSudoShell(t testing.TB, shell string) (string, []byte) {
	t.Helper()
	testenv.Root(t, "sudo tests: a sudoers rule and a password for a test account")
	testenv.Command(t, "sudo", "sudo")
	name, rules, pwFile := SudoUser, "/etc/sudoers.d/actiongw-test", sudoPasswordFile
	if shell != "" {
		name = "actiongw-sudo-" + filepath.Base(shell)
		rules, pwFile = rules+"-"+filepath.Base(shell), pwFile+"-"+name
	}
	ensureUser(t, name, shell)
	userMu.Lock()
	defer userMu.Unlock()
	f, err := os.OpenFile(sudoPasswordFile+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	rule := fmt.Sprintf("Defaults:%s lecture=never\n%s ALL=(ALL:ALL) ALL\n", name, name)
	if err := os.WriteFile(rules, []byte(rule), 0o440); err != nil {
		t.Fatal(err)
	}
	if pw, err := os.ReadFile(pwFile); err == nil && len(pw) > 0 {
		return name, pw
	}
	b := make([]byte, 12)
	rand.Read(b)
	pw := []byte(hex.EncodeToString(b))
	cmd := exec.Command(testenv.Command(t, "chpasswd", "passwd"))
	cmd.Stdin = strings.NewReader(name + ":" + string(pw) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	if err := os.WriteFile(pwFile, pw, 0o600); err != nil {
		t.Fatal(err)
	}
	return name, pw
}

// ProcsHolding lists the processes of this machine whose arguments or
// environment hold b, as "/proc/PID/cmdline: ..." lines: what ps shows to
// anyone (the tests run as root, which reads every process's).
func ProcsHolding(b []byte) []string {
	var found []string
	paths, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range paths {
		for _, f := range []string{"cmdline", "environ"} {
			if data, err := os.ReadFile(filepath.Join(dir, f)); err == nil && bytes.Contains(data, b) {
				found = append(found, dir+"/"+f+": "+strings.ReplaceAll(string(data), "\x00", " "))
			}
		}
	}
	return found
}
