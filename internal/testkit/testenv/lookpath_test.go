//go:build unix

package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// LookPath finds a system tool in the sbin directories when PATH lacks
// them, as Debian's PATH for users does, and only by an absolute path.
func TestLookPath(t *testing.T) {
	onPath, sbin := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(onPath, "both"), filepath.Join(sbin, "both"), filepath.Join(sbin, "tool")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sbin, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	saved := sbinDirs
	sbinDirs = []string{filepath.Join(sbin, "nonexistent"), sbin}
	t.Cleanup(func() { sbinDirs = saved })
	t.Setenv("PATH", onPath)
	cases := []struct {
		name, prog, want string // want "" for an error
	}{
		{"on PATH first", "both", filepath.Join(onPath, "both")},
		{"only in sbin", "tool", filepath.Join(sbin, "tool")},
		{"not executable", "notexec", ""},
		{"nowhere", "nowhere", ""},
		{"a path is not searched for", "x/tool", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := LookPath(c.prog)
			if c.want == "" {
				if err == nil {
					t.Errorf("LookPath(%q): got %q; want an error", c.prog, got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("LookPath(%q): got %q, %v; want %q", c.prog, got, err, c.want)
			}
		})
	}
	// A relative entry of PATH finds nothing: it names a file of whatever
	// directory the test runs in.
	t.Chdir(onPath)
	t.Setenv("PATH", ".")
	if got, err := LookPath("both"); err != nil || got != filepath.Join(sbin, "both") {
		t.Errorf("PATH=.: got %q, %v; want %q, from sbin", got, err, filepath.Join(sbin, "both"))
	}
}
