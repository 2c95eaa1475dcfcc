package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/proc"
	"github.com/actiongw/actiongw/internal/syncbuf"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// binPath is the real actiongw binary, built once with the test-only tools.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "actiongw-mcpserver-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "actiongw")
	build := exec.Command("go", "build", "-tags", "testtools", "-o", binPath, "github.com/actiongw/actiongw/cmd/actiongw")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building actiongw:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeConfig writes a config with the given wire limit (0: default) and
// extra TOML, and returns its path.
func writeConfig(t *testing.T, maxFrame int, extra string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("[server]\nstate_dir = %q\nlog_level = \"debug\"\n", filepath.Join(dir, "state"))
	if maxFrame > 0 {
		cfg += fmt.Sprintf("max_frame_bytes = %d\nresult_bytes = %d\n", maxFrame, min(maxFrame, 65536))
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverCmd returns the command that serves MCP with the given config.
func serverCmd(configPath string, stderr *syncbuf.Buffer) *exec.Cmd {
	cmd := exec.Command(binPath, "serve", "-config", configPath)
	cmd.Env = append(os.Environ(), "ACTIONGW_CONFIG=")
	cmd.Stderr = stderr
	return cmd
}

type server struct {
	*mcphost.Client
	stderr *syncbuf.Buffer
}

// startServer runs the real binary under the project's host client and
// completes the handshake.
func startServer(t *testing.T, ctx context.Context, maxFrame int, opts mcphost.Options) *server {
	t.Helper()
	stderr := &syncbuf.Buffer{}
	c, err := mcphost.Start(ctx, serverCmd(writeConfig(t, maxFrame, ""), stderr), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("server exit: %v", err)
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	return &server{c, stderr}
}

// logged reports whether the server logged a line containing all of parts.
func (s *server) logged(parts ...string) bool {
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// procStatus reads a kB field (VmHWM, VmRSS) of a process's status, in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	n, err := proc.Memory(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
