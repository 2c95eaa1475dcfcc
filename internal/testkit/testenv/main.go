package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// inMain is set while Main runs the tests: the helpers that leave
// something for Main to stop or remove refuse to run without it.
var inMain atomic.Bool

// Main runs the package's tests as m.Run does and exits with their status,
// after it has stopped the Secret Service SecretService started, removed
// the binaries Actiongw built, and checked that no process the tests
// started is still running (on Linux, where Main makes the test process the
// reaper of every orphan below it; a survivor is listed, killed and fails
// the run). When the tests pass, each of checks runs last, and one that
// returns an error fails the run: goleak.Find, say. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M, checks ...func() error) {
	inMain.Store(true)
	reaping := adoptOrphans()
	stopReaping := func() {}
	if reaping {
		stopReaping = reapOrphans()
	}
	code := m.Run()
	stopReaping()
	inMain.Store(false)
	var errs []error
	if err := stopSecretService(); err != nil {
		errs = append(errs, err)
	}
	removeBuilds()
	if reaping {
		if err := noneLeft(); err != nil {
			errs = append(errs, err)
		}
	}
	if code == 0 && len(errs) == 0 {
		for _, check := range checks {
			if err := check(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
	}
	if len(errs) > 0 && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// leftoverGrace is how long a process the tests stopped may take to go
// before Main counts it as left behind.
var leftoverGrace = 10 * time.Second

// needMain fails t when TestMain does not call Main, which cleans up after
// what called it.
func needMain(t testing.TB, what string) {
	t.Helper()
	if !inMain.Load() {
		t.Fatalf("testenv.%s: the package's TestMain must call testenv.Main, which cleans up after it", what)
	}
}

// builds holds the binaries Actiongw built in this process, by tags.
var builds struct {
	mu   sync.Mutex
	dir  string
	done map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Actiongw builds the actiongw command with the build tags given (such as
// "testtools"), once per test process and tags, and returns the binary's
// path; Main removes it. A failed build fails t. -buildvcs=false: VCS
// stamping fails for a user who does not own the checkout.
func Actiongw(t testing.TB, tags ...string) string {
	t.Helper()
	needMain(t, "Actiongw")
	key := strings.Join(tags, ",")
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "actiongw-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatal(err)
		}
		builds.dir, builds.done = dir, map[string]*build{}
	}
	b := builds.done[key]
	if b == nil {
		b = &build{path: filepath.Join(builds.dir, "actiongw"+strings.ReplaceAll("-"+key, ",", "-"))}
		if key == "" {
			b.path = filepath.Join(builds.dir, "actiongw")
		}
		builds.done[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		cmd := exec.Command("go", "build", "-buildvcs=false", "-tags", key, "-o", b.path, "github.com/actiongw/actiongw/cmd/actiongw")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build -tags %q: %v\n%s", key, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
		builds.dir, builds.done = "", nil
	}
}
