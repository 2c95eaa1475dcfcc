//go:build linux

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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestVersionString(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-30T16:41:34Z"},
	}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name           string
		override       string
		commit, date   string
		info           *debug.BuildInfo
		want           string
		wantServerInfo string
	}{
		{"stamped", "", "", "", stamped, "v0.3.1 (revision 0123456789abcdef, with uncommitted changes, committed 2026-11-30T16:41:34Z; go1.26.8)", "v0.3.1"},
		{"ldflags override", "1.0.0", "", "", stamped, "1.0.0 (revision 0123456789abcdef, with uncommitted changes, committed 2026-11-30T16:41:34Z; go1.26.8)", "1.0.0"},
		// goreleaser's build: -X for all three, the go command's VCS stamp off.
		{"release build", "1.2.0", "fedcba9876543210", "2026-12-02T07:00:00Z", devel, "1.2.0 (revision fedcba9876543210, built 2026-12-02T07:00:00Z; go1.26.8)", "1.2.0"},
		{"release build over a VCS stamp", "1.2.0", "fedcba9876543210", "2026-12-02T07:00:00Z", stamped, "1.2.0 (revision fedcba9876543210, with uncommitted changes, committed 2026-11-30T16:41:34Z, built 2026-12-02T07:00:00Z; go1.26.8)", "1.2.0"},
		{"-buildvcs=false", "", "", "", devel, "(devel) (no VCS information; go1.26.8)", "(devel)"},
		{"no build info", "", "", "", nil, "(unknown) (no build information)", "(unknown)"},
		{"no build info, release stamps", "1.2.0", "fedcba9876543210", "2026-12-02T07:00:00Z", nil, "1.2.0 (revision fedcba9876543210, built 2026-12-02T07:00:00Z)", "1.2.0"},
	}
	for _, tt := range tests {
		v := moduleVersion(tt.override, tt.info)
		if v != tt.wantServerInfo {
			t.Errorf("%s: serverInfo.version %q; want %q", tt.name, v, tt.wantServerInfo)
		}
		if got := versionString(v, tt.commit, tt.date, tt.info); got != tt.want {
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
	// The release build as .goreleaser.yaml makes it: no VCS stamp, all three
	// stamps by -X, trimmed.
	release := "-ldflags=-s -w -X main.version=1.2.3 -X main.commit=" + rev + " -X main.date=2026-12-02T07:00:00Z"
	for i, tc := range []struct {
		flags  []string
		want   []string
		served string // the serverInfo.version `serve -demo` must report, when set
	}{
		{[]string{"-buildvcs=true"}, []string{"actiongw v", "-" + rev[:12], "revision " + rev, "committed "}, ""},
		{[]string{"-buildvcs=false"}, []string{"actiongw (devel) (no VCS information; go"}, ""},
		{[]string{"-buildvcs=true", "-ldflags=-X main.version=1.2.3"}, []string{"actiongw 1.2.3 (revision " + rev}, ""},
		{[]string{"-buildvcs=false", "-trimpath", release}, []string{"actiongw 1.2.3 (revision " + rev + ", built 2026-12-02T07:00:00Z; go"}, "1.2.3"},
	} {
		exe := filepath.Join(bin, fmt.Sprintf("actiongw-%d", i))
		build := exec.Command("go", append(append([]string{"build"}, tc.flags...), "-o", exe, "./cmd/actiongw")...)
		build.Dir = clone
		if tc.served != "" {
			// As .goreleaser.yaml builds, so that its build and this one share
			// the compiled packages in the build cache.
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
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
		if tc.served == "" {
			continue
		}
		if strings.Contains(got, "(devel)") {
			t.Errorf("release build: actiongw version = %q; want no (devel)", got)
		}
		if first := strings.Fields(strings.TrimPrefix(got, "actiongw "))[0]; first != tc.served {
			t.Errorf("release build: actiongw version says %q; want %q first", first, tc.served)
		}
		if served := servedVersion(t, exe); served != tc.served {
			t.Errorf("release build: serverInfo.version = %q; want %q, as actiongw version says", served, tc.served)
		}
	}
}

// servedVersion starts `exe serve -demo` and returns the serverInfo.version
// its initialize result reports.
func servedVersion(t *testing.T, exe string) string {
	t.Helper()
	cmd := exec.Command(exe, "serve", "-demo")
	cmd.Env = freshEnv(t, t.TempDir())
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "version-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v\n%s", err, stderr.String())
		}
	}()
	return cs.InitializeResult().ServerInfo.Version
}
