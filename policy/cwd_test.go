package policy

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestDirs(t *testing.T) {
	app := []string{"/srv/app/**"}
	tests := []struct {
		name     string
		allow    []string
		dir      string
		want     string // the directory to enter, when allowed
		wantRule string // "" when allowed
	}{
		{"no allow_cwd: as sent", nil, "tmp/../x", "tmp/../x", ""},
		{"no allow_cwd: login directory", nil, "", "", ""},
		{"allowed dir itself", app, "/srv/app", "/srv/app", ""},
		{"allowed under", app, "/srv/app/releases/7", "/srv/app/releases/7", ""},
		{"trailing slash cleaned", app, "/srv/app/", "/srv/app", ""},
		{"double slash cleaned", app, "//srv//app", "/srv/app", ""},
		{"dot cleaned", app, "/srv/./app/.", "/srv/app", ""},
		// What cd gets is the clean path: ".." is applied here, once.
		{"dot-dot inside stays inside", app, "/srv/app/current/../shared", "/srv/app/shared", ""},
		{"dot-dot out of it", app, "/srv/app/../../home/u/uploads", "", `allow_cwd ["/srv/app/**"]`},
		{"dot-dot above the root", app, "/../../srv/app", "/srv/app", ""},
		{"sibling by prefix", app, "/srv/application", "", `allow_cwd ["/srv/app/**"]`},
		{"outside", app, "/home/u/uploads", "", `allow_cwd ["/srv/app/**"]`},
		{"relative", app, "srv/app", "", `allow_cwd ["/srv/app/**"]`},
		{"dot relative", app, "./uploads", "", `allow_cwd ["/srv/app/**"]`},
		{"tilde is no home here", app, "~/uploads", "", `allow_cwd ["/srv/app/**"]`},
		{"dash is no OLDPWD here", app, "-", "", `allow_cwd ["/srv/app/**"]`},
		{"login directory not known", app, "", "", `allow_cwd ["/srv/app/**"]`},
		{"NUL", app, "/srv/app\x00/../../tmp", "", `allow_cwd ["/srv/app/**"]`},
		{"proc link is a path like any", app, "/proc/self/cwd", "", `allow_cwd ["/srv/app/**"]`},
		{"very long, cleaned inside", app, "/srv/app" + strings.Repeat("/x/..", 2000), "/srv/app", ""},
		{"star is one segment", []string{"/home/*/work"}, "/home/ann/work", "/home/ann/work", ""},
		{"star is not two", []string{"/home/*/work"}, "/home/ann/x/work", "", `allow_cwd ["/home/*/work"]`},
		{"exact only", []string{"/srv/app"}, "/srv/app/sub", "", `allow_cwd ["/srv/app"]`},
		{"root", []string{"/"}, "/", "/", ""},
		{"invalid pattern fails closed", []string{"/srv/*.d"}, "/srv/a.d", "", "allow_cwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&Dirs{Target: "web", Allow: tt.allow}).Check(tt.dir)
			if tt.wantRule == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Check(%q): got %q, %v; want %q", tt.dir, got, err, tt.want)
				}
				return
			}
			var d *DeniedError
			if !errors.As(err, &d) || got != "" {
				t.Fatalf("Check(%q): got %q, %v; want a *DeniedError", tt.dir, got, err)
			}
			if d.Rule != tt.wantRule || d.Target != "web" {
				t.Errorf("Check(%q): got rule %q target %q; want rule %q target web", tt.dir, d.Rule, d.Target, tt.wantRule)
			}
			if len(d.Reason) > 400 || strings.IndexByte(d.Reason, 0) >= 0 {
				t.Errorf("Check(%q): reason %q; want it short and without NUL", tt.dir, d.Reason)
			}
		})
	}
}

func TestDirsValidate(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		want  string // part of the error; "" for valid
	}{
		{"none", nil, ""},
		{"valid", []string{"/srv/app/**", "/home/*/work", "/"}, ""},
		{"relative", []string{"/srv/**", "srv/**"}, `allow_cwd[1] "srv/**": it is not an absolute path`},
		{"unclean", []string{"/srv/app/"}, `allow_cwd[0] "/srv/app/": it is not a clean path`},
		{"inner double star", []string{"/srv/**/bin"}, `"**" may only be the last segment`},
		{"partial wildcard", []string{"/srv/app-*"}, "wildcards match whole segments only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Dirs{Allow: tt.allow}).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDirsWritable(t *testing.T) {
	tests := []struct {
		name      string
		cwd, path []string
		want      bool
	}{
		{"none", nil, []string{"/srv/**"}, false},
		{"no transfers", []string{"/srv/app/**"}, nil, false},
		{"same tree", []string{"/srv/app/**"}, []string{"/srv/app/**"}, true},
		{"uploads under the cwd tree", []string{"/srv/app/**"}, []string{"/srv/app/uploads/**"}, true},
		{"cwd under the upload tree", []string{"/srv/app/bin"}, []string{"/srv/**"}, true},
		{"one file in the cwd", []string{"/srv/app"}, []string{"/srv/app/run.sh"}, true},
		{"a file deeper than the cwd", []string{"/srv/app"}, []string{"/srv/app/conf/a.toml"}, false},
		{"star segments", []string{"/home/*/work"}, []string{"/home/ann/*/x"}, true},
		{"disjoint", []string{"/srv/app/**"}, []string{"/var/log/app/**"}, false},
		{"sibling by prefix", []string{"/srv/app/**"}, []string{"/srv/application/**"}, false},
		{"root cwd", []string{"/"}, []string{"/x"}, true},
		{"root cwd, deeper file", []string{"/"}, []string{"/x/y"}, false},
		{"root tree", []string{"/**"}, []string{"/a/b/c"}, true},
		{"only the directory itself", []string{"/srv/app/**"}, []string{"/srv/app"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cwd, file, got := (&Dirs{Allow: tt.cwd}).Writable(&Paths{Allow: tt.path})
			if got != tt.want {
				t.Fatalf("Writable(%q, %q): got %v (%q, %q); want %v", tt.cwd, tt.path, got, cwd, file, tt.want)
			}
		})
	}
}

// FuzzDirs checks Check against its promise: an allowed directory comes
// back absolute, clean and NUL-free, a match of a pattern, and the clean
// form of what was asked.
func FuzzDirs(f *testing.F) {
	f.Add("/srv/app", "/srv/app/../../tmp")
	f.Add("/srv", "//srv/./x/")
	f.Add("/", "/a\x00/..")
	f.Fuzz(func(t *testing.T, allowDir, dir string) {
		d := &Dirs{Allow: []string{strings.TrimSuffix(allowDir, "/") + "/**"}}
		if d.Validate() != nil {
			return
		}
		got, err := d.Check(dir)
		if err != nil {
			return
		}
		if strings.IndexByte(got, 0) >= 0 || !strings.HasPrefix(got, "/") || path.Clean(got) != got || got != path.Clean(dir) {
			t.Fatalf("Check(%q) = %q; want the clean, absolute, NUL-free form of it", dir, got)
		}
		if !MatchPath(d.Allow[0], got) {
			t.Fatalf("Check(%q) = %q, which %q does not match", dir, got, d.Allow[0])
		}
	})
}
