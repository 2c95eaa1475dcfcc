package policy

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	all := []string{"/**"}
	tests := []struct {
		name        string
		allow, deny []string
		path        string
		wantRule    string // "" when allowed
	}{
		{"no allow_paths: transfers off", nil, nil, "/etc/passwd", "allow_paths"},
		{"relative", all, nil, "etc/passwd", "path"},
		{"empty", all, nil, "", "path"},
		{"dot dot", all, nil, "/srv/app/../../etc/shadow", "path"},
		{"trailing slash", all, nil, "/srv/app/", "path"},
		{"double slash", all, nil, "/srv//app", "path"},
		{"NUL", all, nil, "/srv/app\x00/x", "path"},
		{"allow dir itself", []string{"/srv/app/**"}, nil, "/srv/app", ""},
		{"allow under dir", []string{"/srv/app/**"}, nil, "/srv/app/conf/a.toml", ""},
		{"allow is by segment", []string{"/srv/app/**"}, nil, "/srv/application/x", `allow_paths ["/srv/app/**"]`},
		{"allow misses", []string{"/srv/app/**"}, nil, "/etc/passwd", `allow_paths ["/srv/app/**"]`},
		{"star is one segment", []string{"/home/*/notes"}, nil, "/home/ann/notes", ""},
		{"star not two segments", []string{"/home/*/notes"}, nil, "/home/ann/x/notes", `allow_paths ["/home/*/notes"]`},
		{"deny wins", []string{"/srv/**"}, []string{"/srv/app/secrets/**"}, "/srv/app/secrets/key", `deny_paths[0] "/srv/app/secrets/**"`},
		{"deny dir itself", all, []string{"/srv/app/secrets/**"}, "/srv/app/secrets", `deny_paths[0] "/srv/app/secrets/**"`},
		{"deny under allow all", all, []string{"/etc/shadow"}, "/etc/shadow", `deny_paths[0] "/etc/shadow"`},
		{"deny exact leaves siblings", all, []string{"/etc/shadow"}, "/etc/shadow-", ""},
		// A denied directory denies what is under it: "/home/u/.ssh"
		// must not leave its keys to be downloaded.
		{"deny dir covers its files", all, []string{"/home/u/.ssh"}, "/home/u/.ssh/id_ed25519", `deny_paths[0] "/home/u/.ssh"`},
		{"deny segment wildcard covers below", all, []string{"/home/*/.ssh"}, "/home/u/.ssh/keys/id_rsa", `deny_paths[0] "/home/*/.ssh"`},
		{"deny dir leaves its parent", all, []string{"/home/u/.ssh"}, "/home/u", ""},
		{"root allow", []string{"/**"}, nil, "/", ""},
		{"invalid deny fails closed", nil, []string{"/etc/*.key"}, "/srv/x", "paths"},
		{"invalid allow fails closed", []string{"srv/**"}, nil, "/srv/x", "paths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Paths{Target: "web", Allow: tt.allow, Deny: tt.deny}
			err := p.Check(tt.path)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("Check(%q): got %v; want allowed", tt.path, err)
				}
				return
			}
			var d *DeniedError
			if !errors.As(err, &d) {
				t.Fatalf("Check(%q): got %v; want *DeniedError", tt.path, err)
			}
			if d.Rule != tt.wantRule || d.Target != "web" {
				t.Errorf("Check(%q): got rule %q target %q; want rule %q target web", tt.path, d.Rule, d.Target, tt.wantRule)
			}
		})
	}
}

func TestPathsValidate(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		want        string // part of the error; "" for valid
	}{
		{"none", nil, nil, ""},
		{"valid", []string{"/srv/**", "/home/*/x", "/"}, []string{"/etc/shadow"}, ""},
		{"relative", []string{"srv/**"}, nil, `allow_paths[0] "srv/**": it is not an absolute path`},
		{"unclean", nil, []string{"/a", "/etc/../x"}, `deny_paths[1] "/etc/../x": it is not a clean path`},
		{"inner double star", nil, []string{"/home/**/.ssh"}, `"**" may only be the last segment`},
		{"partial wildcard", nil, []string{"/etc/*.key"}, "wildcards match whole segments only"},
		{"question mark", []string{"/etc/a?"}, nil, "wildcards match whole segments only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Paths{Allow: tt.allow, Deny: tt.deny}).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// under reports whether the clean absolute path p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// FuzzPaths checks Check against a simple reference: an allowed path is
// absolute, clean and NUL-free; a path under a denied directory is never
// allowed, whatever the allow list; an allowed path under an allow list
// of one directory is under that directory.
func FuzzPaths(f *testing.F) {
	f.Add("/etc", "/srv", "/etc/passwd")
	f.Add("/srv/app/secrets", "/srv/app", "/srv/app/secrets/../secrets/key")
	f.Add("/", "/", "/x")
	f.Add("/a/b", "/a", "/a/b")
	f.Add("/a", "/a", "/a\x00/b")
	f.Fuzz(func(t *testing.T, denyDir, allowDir, p string) {
		deny := strings.TrimSuffix(denyDir, "/") + "/**"
		allow := strings.TrimSuffix(allowDir, "/") + "/**"
		pp := &Paths{Allow: []string{allow}, Deny: []string{deny}}
		if pp.Validate() != nil {
			return // Check denies everything; covered by TestPaths
		}
		if err := pp.Check(p); err != nil {
			return
		}
		if strings.IndexByte(p, 0) >= 0 || !strings.HasPrefix(p, "/") || path.Clean(p) != p {
			t.Fatalf("allowed path %q is not absolute, clean and NUL-free", p)
		}
		// The directory a "DIR/**" pattern covers ("/**": the root).
		root := func(pat string) string { return path.Clean("/" + strings.TrimSuffix(pat, "/**")) }
		if under(p, root(deny)) {
			t.Fatalf("path %q allowed but deny %q covers it", p, deny)
		}
		if !under(p, root(allow)) {
			t.Fatalf("path %q allowed but is outside allow %q", p, allow)
		}
	})
}
