package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		command     string
		wantRule    string // "" when allowed
	}{
		{"no rules allow", nil, nil, "uptime", ""},
		{"empty command", nil, nil, "", "command"},
		{"allow matches whole", []string{`journalctl -u [a-z]+`}, nil, "journalctl -u nginx", ""},
		{"allow is anchored at the end", []string{`journalctl -u [a-z]+`}, nil, "journalctl -u nginx; rm -rf /", "allow_commands"},
		{"allow is anchored at the start", []string{`uptime`}, nil, "sudo uptime", "allow_commands"},
		{"allow alternation stays anchored", []string{`a|b`}, nil, "ab", "allow_commands"},
		{"not in allow list", []string{`uptime`}, nil, "reboot", "allow_commands"},
		{"deny matches anywhere", nil, []string{`rm `}, "ls; rm -rf /", "deny_commands[0]"},
		{"deny wins over allow", []string{`.*`}, []string{`reboot`}, "reboot", "deny_commands[0]"},
		{"second deny named", nil, []string{`x`, `shutdown`}, "shutdown now", "deny_commands[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CompileCommands("web1", tt.allow, tt.deny)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Check(tt.command)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v; want allowed", tt.command, err)
				}
				return
			}
			var de *DeniedError
			if !errors.As(err, &de) {
				t.Fatalf("Check(%q) = %v; want *DeniedError", tt.command, err)
			}
			if !strings.HasPrefix(de.Rule, tt.wantRule) || de.Target != "web1" {
				t.Errorf("Check(%q) denied by %q on %q; want rule %q on web1", tt.command, de.Rule, de.Target, tt.wantRule)
			}
			if !strings.Contains(err.Error(), "web1") || !strings.Contains(err.Error(), tt.wantRule) {
				t.Errorf("error %q should name the target and the rule", err)
			}
		})
	}
}

func TestCompileCommandsBadPattern(t *testing.T) {
	// "ls)|(.*" and "ls))|((.*" are valid once inside the anchoring
	// group, where they would close it early and allow anything.
	for _, p := range []string{"(", "ls)|(.*", "ls))|((.*", ")"} {
		if _, err := CompileCommands("t", []string{"uptime", p}, nil); err == nil || !strings.Contains(err.Error(), "allow_commands[1]") {
			t.Errorf("CompileCommands(allow %q) = %v; want an error naming allow_commands[1]", p, err)
		}
	}
	if _, err := CompileCommands("t", nil, []string{"ok", "["}); err == nil || !strings.Contains(err.Error(), "deny_commands[1]") {
		t.Errorf("CompileCommands(bad deny) = %v; want an error naming deny_commands[1]", err)
	}
}

func TestRequests(t *testing.T) {
	r := &Requests{Target: "gh", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/**", "/users/*"}}
	tests := []struct {
		method, path string
		wantRule     string
	}{
		{"GET", "/repos/a/b/issues", ""},
		{"get", "/repos", ""},
		{"HEAD", "/users/octo", ""},
		{"POST", "/repos/a", "methods"},
		{"GET", "/users/octo/repos", "paths"},
		{"GET", "/users/", "paths"},
		{"GET", "/orgs/x", "paths"},
		{"GET", "/reposx", "paths"},
	}
	for _, tt := range tests {
		err := r.Check(tt.method, tt.path)
		var de *DeniedError
		switch {
		case tt.wantRule == "" && err != nil:
			t.Errorf("Check(%s %s) = %v; want allowed", tt.method, tt.path, err)
		case tt.wantRule != "" && (!errors.As(err, &de) || !strings.HasPrefix(de.Rule, tt.wantRule)):
			t.Errorf("Check(%s %s) = %v; want denied by %s", tt.method, tt.path, err, tt.wantRule)
		}
	}
	if err := (&Requests{Target: "x", Methods: []string{"GET"}}).Check("GET", "/anything/at/all"); err != nil {
		t.Errorf("no path patterns: Check = %v; want allowed", err)
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/", "/", true},
		{"/a", "/a", true},
		{"/a", "/a/", false},
		{"/a/*", "/a/b", true},
		{"/a/*", "/a/", false},
		{"/a/*/c", "/a/b/c", true},
		{"/a/*/c", "/a/b/d", false},
		{"/a/**", "/a", true},
		{"/a/**", "/a/b/c/d", true},
		{"/a/**", "/ab", false},
		{"/**", "/anything", true},
		{"/a/**/c", "/a/**/c", true}, // ** only special at the end
		{"/a/**/c", "/a/b/c", false},
	}
	for _, tt := range tests {
		if got := MatchPath(tt.pattern, tt.path); got != tt.want {
			t.Errorf("MatchPath(%q, %q) = %v; want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		asked, def, max time.Duration
		want            time.Duration
		capped          bool
	}{
		{0, time.Minute, time.Hour, time.Minute, false},
		{5 * time.Second, time.Minute, time.Hour, 5 * time.Second, false},
		{2 * time.Hour, time.Minute, time.Hour, time.Hour, true},
		{0, 2 * time.Hour, time.Hour, time.Hour, false},
	}
	for _, tt := range tests {
		got, capped := timeout(tt.asked, tt.def, tt.max)
		if got != tt.want || capped != tt.capped {
			t.Errorf("timeout(%v, %v, %v) = %v, %v; want %v, %v", tt.asked, tt.def, tt.max, got, capped, tt.want, tt.capped)
		}
	}
}

func FuzzCommands(f *testing.F) {
	f.Add("journalctl -u [a-z]+", "rm ", "journalctl -u nginx")
	f.Add(".*", "", "anything; reboot")
	f.Fuzz(func(t *testing.T, allow, deny, command string) {
		c, err := CompileCommands("t", []string{allow}, []string{deny})
		if err != nil {
			return
		}
		err = c.Check(command)
		// Properties: deny wins; allowed means the allow pattern matches the
		// whole command.
		if err == nil {
			if c.deny[0].re.MatchString(command) {
				t.Fatalf("command %q allowed although deny %q matches", command, deny)
			}
			if loc := c.allow[0].re.FindStringIndex(command); loc == nil || loc[0] != 0 || loc[1] != len(command) {
				t.Fatalf("command %q allowed but allow %q does not match it whole", command, allow)
			}
		}
	})
}

func FuzzMatchPath(f *testing.F) {
	f.Add("/repos/**", "/repos/a/b")
	f.Add("/a/*/c", "/a/b/c")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		// A pattern without wildcards matches only the identical path.
		if !strings.Contains(pattern, "*") && MatchPath(pattern, path) &&
			strings.TrimPrefix(pattern, "/") != strings.TrimPrefix(path, "/") {
			t.Fatalf("literal %q matched different path %q", pattern, path)
		}
		// "*" never matches across a slash.
		if pattern == "/*" && MatchPath(pattern, path) && strings.Contains(strings.TrimPrefix(path, "/"), "/") {
			t.Fatalf("/* matched %q", path)
		}
	})
}

func TestListed(t *testing.T) {
	c, err := CompileCommands("t", []string{"uptime", "df -h"}, []string{"rm "})
	if err != nil {
		t.Fatal(err)
	}
	all, err := CompileCommands("t", nil, []string{"rm "})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		c       *Commands
		command string
		listed  bool
		denied  bool
	}{
		{c, "uptime", true, false},
		{c, "reboot", false, false},
		{c, "uptime; rm -rf /", false, true}, // deny wins over asking
		{c, "", false, true},
		{all, "reboot", true, false}, // no allow list lists everything
		{all, "rm x", false, true},
	}
	for _, tt := range tests {
		listed, err := tt.c.Listed(tt.command)
		if listed != tt.listed || (err != nil) != tt.denied {
			t.Errorf("Listed(%q) = %v, %v; want %v, denied %v", tt.command, listed, err, tt.listed, tt.denied)
		}
		if checkErr := tt.c.Check(tt.command); (checkErr == nil) != tt.listed {
			t.Errorf("Check(%q) = %v; Listed says %v", tt.command, checkErr, tt.listed)
		}
	}
}
