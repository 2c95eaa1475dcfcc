//go:build linux

package sshexec

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestAwaitWatcher runs a terminal's wrapper (armedBeside) in each shell
// a target may have: its program starts once the watcher's line
// (watcherArmed) says it is armed, and without it the wrapper gives up at
// its deadline and runs nothing. Either way its FIFO is gone after.
func TestAwaitWatcher(t *testing.T) {
	shells := []struct {
		name string
		sh   func(t *testing.T) (sh, path string)
	}{
		{"sh", func(*testing.T) (string, string) { return "/bin/sh", "/usr/bin:/bin" }},
		{"bash", func(*testing.T) (string, string) { return "/bin/bash", "/usr/bin:/bin" }},
		{"busybox", func(t *testing.T) (string, string) {
			p := busyboxPath(t)
			return filepath.Join(p, "sh"), p
		}},
	}
	for _, shell := range shells {
		for _, armed := range []bool{true, false} {
			name := shell.name + "/no_watcher"
			if armed {
				name = shell.name + "/watcher"
			}
			t.Run(name, func(t *testing.T) {
				sh, path := shell.sh(t)
				dir, id := t.TempDir(), newRunID()
				canary, fifo := filepath.Join(dir, "ran"), filepath.Join(dir, "actiongw-"+id+".arm")
				env := []string{"PATH=" + path, "TMPDIR=" + dir}
				var stderr bytes.Buffer
				// The wait the wrapper gives its watcher: long when one
				// comes (a loaded machine took over a second to start
				// the watcher's shell), short when none does.
				deadline := time.Second
				if armed {
					deadline = 30 * time.Second
				}
				cmd := exec.Command(sh, "-c", wrap(&Request{Command: "echo ran > " + canary}, id, armedBeside, deadline, time.Second, true))
				cmd.Env, cmd.Stderr = env, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if armed {
					testenv.WaitFor(t, 30*time.Second, "the wrapper's FIFO", func() bool {
						fi, err := os.Stat(fifo)
						return err == nil && fi.Mode()&fs.ModeNamedPipe != 0
					})
					watcher := exec.Command(sh, "-c", strings.ReplaceAll(watcherArmed, "@ID@", id))
					watcher.Env = env
					if out, err := watcher.CombinedOutput(); err != nil {
						t.Fatalf("the watcher's line: %v: %s", err, out)
					}
				}
				err := cmd.Wait()
				_, ranErr := os.Stat(canary)
				var exit *exec.ExitError
				switch {
				case armed && (err != nil || ranErr != nil):
					t.Errorf("armed: the wrapper ended with %v (%s) and the program ran: %v; want it run", err, stderr.String(), ranErr == nil)
				case !armed && (!errors.As(err, &exit) || exit.ExitCode() != 125 || !strings.Contains(stderr.String(), "not armed in time")):
					t.Errorf("no watcher: the wrapper ended with %v (%s); want exit 125, the reason said", err, stderr.String())
				case !armed && ranErr == nil:
					t.Error("no watcher: the program ran")
				}
				if _, err := os.Lstat(fifo); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the FIFO is left behind (%v)", err)
				}
			})
		}
	}
}
