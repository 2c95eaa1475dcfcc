package zxcvbn

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestInitBuildsNothing: Go runs the init of every package a binary links
// in every process, so serve, which never estimates, would pay for the
// estimator's tables (about 10 MiB) were they built then. They must wait
// for the first estimate. It runs this test binary again with
// GODEBUG=inittrace=1 and reads what each of the estimator's packages
// allocates at init.
func TestInitBuildsNothing(t *testing.T) {
	const limit = 4 << 10 // bytes: a few small maps and sync.OnceValues
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	trace := regexp.MustCompile(`(?m)^init (\S+) @.*, (\d+) bytes, (\d+) allocs$`).FindAllStringSubmatch(string(out), -1)
	if len(trace) == 0 {
		t.Fatalf("no init trace in the output of %s:\n%s", cmd, out)
	}
	for _, m := range trace {
		pkg, allocs := m[1], m[3]
		if !strings.HasPrefix(pkg, "github.com/actiongw/actiongw/internal/zxcvbn") {
			continue
		}
		if n, _ := strconv.Atoi(m[2]); n > limit {
			t.Errorf("init of %s allocates %d bytes (%s allocs); want at most %d: build its tables on first use", pkg, n, allocs, limit)
		}
	}
}
