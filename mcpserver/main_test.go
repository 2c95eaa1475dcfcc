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

	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// TestMain removes the binary and checks that no server process is left.
func TestMain(m *testing.M) { testenv.Main(m) }

// binary is the real actiongw binary, with the test-only tools.
func binary(t *testing.T) string { return testenv.Actiongw(t, "testtools") }

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
func serverCmd(t *testing.T, configPath string, stderr *syncbuf.Buffer) *exec.Cmd {
	cmd := exec.Command(binary(t), "serve", "-config", configPath)
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
	c, err := mcphost.Start(ctx, serverCmd(t, writeConfig(t, maxFrame, ""), stderr), opts)
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
