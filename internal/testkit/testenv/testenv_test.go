package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proc"
)

// The test binary doubles as a package under test, in the mode named by
// this variable, run by the tests below as go test would run it.
const modeEnv = "TESTENV_TEST_MODE"

func TestMain(m *testing.M) {
	if os.Getenv(modeEnv) == "claim" { // firstInRun once, for TestFirstInRun
		if firstInRun("a part") {
			os.Stdout.WriteString("first\n")
		}
		os.Exit(0)
	}
	Main(m)
}

// TestModeMissing and TestModeOrphan are what the subprocesses run.
func TestModeMissing(t *testing.T) {
	if os.Getenv(modeEnv) != "missing" {
		return // run by TestMissing
	}
	Missing(t, "a part", "get it somewhere")
	t.Error("Missing returned")
}

func TestModeOrphan(t *testing.T) {
	if os.Getenv(modeEnv) != "orphan" {
		return // run by TestLeftovers
	}
	leftoverGrace = time.Second
	// The shell exits at once; its child lives on, an orphan.
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("orphan " + strings.TrimSpace(string(out)) + "\n")
}

// sub runs the test binary in mode with env added.
func sub(t *testing.T, mode, run string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.v")
	cmd.Env = append(environWithout("CI", modeEnv), append(env, modeEnv+"="+mode)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Missing skips here and fails under CI, saying what is missing and how
// to get it either way.
func TestMissing(t *testing.T) {
	tests := []struct {
		ci     string
		fail   bool
		output string
	}{
		{"", false, "skipped: needs a part: get it somewhere"},
		{"false", false, "skipped: needs a part: get it somewhere"},
		{"true", true, "missing under CI: needs a part: get it somewhere"},
		{"1", true, "missing under CI: needs a part: get it somewhere"},
	}
	for _, tt := range tests {
		out, err := sub(t, "missing", "TestModeMissing", "CI="+tt.ci)
		if failed := err != nil; failed != tt.fail || !strings.Contains(out, tt.output) || strings.Contains(out, "Missing returned") {
			t.Errorf("CI=%q: got failed %v, output\n%s\nwant failed %v and %q", tt.ci, failed, out, tt.fail, tt.output)
		}
	}
}

// Main fails the run when a process the tests started outlives them, and
// kills it.
func TestLeftovers(t *testing.T) {
	if !adoptOrphans() {
		t.Skip("orphans are not checked on this system")
	}
	out, err := sub(t, "orphan", "TestModeOrphan")
	if err == nil || !strings.Contains(out, "process(es) the tests started still ran") || !strings.Contains(out, "sleep 60") {
		t.Fatalf("got %v and output\n%s\nwant a failed run naming the sleep", err, out)
	}
	_, rest, _ := strings.Cut(out, "orphan ")
	pid, _ := strconv.Atoi(strings.Fields(rest)[0])
	if pid <= 0 || !Eventually(30*time.Second, func() bool { return !proc.Alive(pid) }) {
		t.Errorf("the orphan %d still runs after the run", pid)
	}
}

// Of the test processes of one run (one parent), only the first to claim
// a part gets it.
func TestFirstInRun(t *testing.T) {
	var firsts int
	tmp := t.TempDir()
	for range 3 {
		out, err := sub(t, "claim", "", "TMPDIR="+tmp)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		firsts += strings.Count(out, "first")
	}
	if firsts != 1 {
		t.Errorf("%d of 3 processes of one run were first; want 1", firsts)
	}
}

// The tests' Secret Service answers on its own bus, which t's
// environment names.
func TestSecretService(t *testing.T) {
	addr := SecretService(t)
	if got := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); got != addr || !strings.HasPrefix(addr, "unix:path=") {
		t.Errorf("DBUS_SESSION_BUS_ADDRESS %q; want the tests' bus %q", got, addr)
	}
	if again := SecretService(t); again != addr {
		t.Errorf("second call: %q; want the same bus %q", again, addr)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Minute, "three polls", func() bool { n++; return n == 3 })
	if Eventually(50*time.Millisecond, func() bool { return false }) {
		t.Error("Eventually of a false condition: got true")
	}
}
