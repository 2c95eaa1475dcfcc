package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServerLogin logs in with the OpenSSH client, as a user of the harness
// would, and checks the account and the strict host key check.
func TestServerLogin(t *testing.T) {
	s := Start(t, Options{})
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, s.ClientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, want string }{{User, User}, {"root", "root"}} {
		start := time.Now()
		out, err := exec.Command("ssh", "-F", "/dev/null", "-i", key, "-p", strconv.Itoa(s.Port),
			"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
			"-o", "UserKnownHostsFile="+s.KnownHosts, "-o", "HostKeyAlgorithms=ssh-ed25519",
			tc.user+"@"+s.Host, "id -un").CombinedOutput()
		t.Logf("%s: %v", tc.user, time.Since(start))
		if err != nil {
			t.Fatalf("ssh as %s: %v: %s\n%s", tc.user, err, out, s.Log())
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("id -un as %s: got %q; want %q", tc.user, got, tc.want)
		}
	}
}
