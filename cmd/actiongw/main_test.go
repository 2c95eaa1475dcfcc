package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is the binary the tests run, built once per test process.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// actiongwBinary builds the command for a test that runs it as a person
// would.
func actiongwBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "actiongw-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "actiongw")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
