package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestVersionString(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-30T16:41:34Z"},
	}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name     string
		override string
		info     *debug.BuildInfo
		want     string
	}{
		{"stamped", "", stamped, "v0.3.1 (revision 0123456789abcdef, with uncommitted changes, committed 2026-11-30T16:41:34Z; go1.26.8)"},
		{"ldflags override", "1.0.0", stamped, "1.0.0 (revision 0123456789abcdef, with uncommitted changes, committed 2026-11-30T16:41:34Z; go1.26.8)"},
		{"-buildvcs=false", "", devel, "(devel) (no VCS information; go1.26.8)"},
		{"no build info", "", nil, "(unknown) (no build information)"},
	}
	for _, tt := range tests {
		if got := versionString(moduleVersion(tt.override, tt.info), tt.info); got != tt.want {
			t.Errorf("%s: version %q; want %q", tt.name, got, tt.want)
		}
	}
}

// TestVersionOfBuiltBinary builds actiongw as a person would, in a clone of
// this checkout's HEAD with VCS stamping on, and checks that `actiongw
// version` prints the revision; and that a build without stamping prints
// something. A clone, because the go command stamps only where .git is a
// directory, not in a git worktree.
func TestVersionOfBuiltBinary(t *testing.T) {
	testenv.Command(t, "git", "git")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	rev, top := git(".", "rev-parse", "HEAD"), git(".", "rev-parse", "--show-toplevel")
	clone := filepath.Join(t.TempDir(), "src")
	git(".", "clone", "-q", "--no-checkout", top, clone)
	git(clone, "checkout", "-q", rev)
	// Build the code under test: the working tree's files over HEAD's.
	for _, f := range strings.Split(git(top, "ls-files", "-co", "--exclude-standard"), "\n") {
		data, err := os.ReadFile(filepath.Join(top, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(clone, f)), 0o755)
		if err := os.WriteFile(filepath.Join(clone, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirty := git(clone, "status", "--porcelain") != ""
	bin := t.TempDir()
	for i, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"-buildvcs=true"}, []string{"actiongw v", "-" + rev[:12], "revision " + rev, "committed "}},
		{[]string{"-buildvcs=false"}, []string{"actiongw (devel) (no VCS information; go"}},
		{[]string{"-buildvcs=true", "-ldflags=-X main.version=1.2.3"}, []string{"actiongw 1.2.3 (revision " + rev}},
	} {
		exe := filepath.Join(bin, fmt.Sprintf("actiongw-%d", i))
		build := exec.Command("go", append(append([]string{"build"}, tc.flags...), "-o", exe, "./cmd/actiongw")...)
		build.Dir = clone
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", strings.Join(tc.flags, " "), err, out)
		}
		out, err := exec.Command(exe, "version").Output()
		if err != nil {
			t.Fatalf("actiongw version: %v", err)
		}
		got := strings.TrimSpace(string(out))
		if dirty && tc.flags[0] == "-buildvcs=true" {
			tc.want = append(tc.want, "with uncommitted changes")
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: actiongw version = %q; want it to contain %q", strings.Join(tc.flags, " "), got, w)
			}
		}
	}
}
