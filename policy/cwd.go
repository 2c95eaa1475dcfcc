package policy

import (
	"fmt"
	"path"
	"strings"
)

// Dirs holds the working-directory rule of one SSH target (allow_cwd):
// which directories a command may run in. A command whose program is a
// relative path ("./run.sh") runs whatever file that path names in its
// directory, so the directory decides what runs, as much as the command.
type Dirs struct {
	Target string
	// Allow lists the directories a command may run in, as Paths
	// patterns (absolute, clean; "*" one whole segment, a final "**" a
	// directory and all under it). Empty allows any directory, relative
	// ones included.
	Allow []string
}

// Validate reports the first pattern that Check could not honour, naming
// allow_cwd and its index.
func (d *Dirs) Validate() error {
	for i, pat := range d.Allow {
		if why := badPattern(pat); why != "" {
			return fmt.Errorf("allow_cwd[%d] %q: %s", i, pat, why)
		}
	}
	return nil
}

// Check returns the directory a command is to run in for dir, the
// directory a call (or the target) asked for, or a *DeniedError.
//
// With no Allow list (or no Dirs), dir comes back as it was: the remote shell resolves
// a relative one against the login directory, "" is the login directory.
// With one, dir must be absolute; it is cleaned lexically ("//" and
// trailing slashes dropped, "." and ".." applied), and the clean form is
// both what the patterns match and what is returned, so the remote `cd`
// gets exactly the path that was checked and no ".." is left for it to
// resolve its own way. Symlinks are not resolved: a link inside an
// allowed directory leads where it points, as it does for the person who
// made it. "" (the login directory) is denied, since the patterns cannot
// say whether it is allowed. A pattern that Validate refuses denies every
// directory (fail closed).
func (d *Dirs) Check(dir string) (string, error) {
	if d == nil || len(d.Allow) == 0 {
		return dir, nil
	}
	rule := fmt.Sprintf("allow_cwd %q", d.Allow)
	if err := d.Validate(); err != nil {
		return "", &DeniedError{Target: d.Target, Rule: "allow_cwd", Reason: fmt.Sprintf("the target's allow_cwd is invalid, so every directory is denied: %v", err)}
	}
	switch {
	case dir == "":
		return "", &DeniedError{Target: d.Target, Rule: rule,
			Reason: "no cwd given and the target sets none, and the login directory is not known to be allowed: give a cwd that allow_cwd allows"}
	case dir[0] != '/':
		// Relative to a directory the gateway does not know (the login
		// directory, or one of the remote's $CDPATH).
		return "", &DeniedError{Target: d.Target, Rule: rule, Reason: fmt.Sprintf("cwd %q is not an absolute path", clip(dir))}
	case strings.IndexByte(dir, 0) >= 0:
		return "", &DeniedError{Target: d.Target, Rule: rule, Reason: "cwd contains a NUL byte"}
	}
	clean := path.Clean(dir)
	for _, pat := range d.Allow {
		if MatchPath(pat, clean) {
			return clean, nil
		}
	}
	return "", &DeniedError{Target: d.Target, Rule: rule, Reason: fmt.Sprintf("cwd %q matches no allowed directory", clip(clean))}
}

// Writable returns a pattern of d.Allow that allows a directory into which
// p lets a file be uploaded, and the pattern of p.Allow that lets it, when
// there is one: there, a file an agent uploads can be what a relative
// program names. It judges patterns, not the files there are: p.Deny is
// not subtracted, so it may find an overlap that deny_paths closes.
func (d *Dirs) Writable(p *Paths) (cwd, file string, ok bool) {
	for _, c := range d.Allow {
		// The files directly in a directory that c allows.
		in := segments(c)
		switch {
		case c == "/":
			in = []string{"*"}
		case in[len(in)-1] == "**":
			in = append(in[:len(in)-1:len(in)-1], "*", "**")
		default:
			in = append(in[:len(in):len(in)], "*")
		}
		for _, f := range p.Allow {
			if badPattern(c) == "" && badPattern(f) == "" && intersect(in, segments(f)) {
				return c, f, true
			}
		}
	}
	return "", "", false
}

func segments(pat string) []string { return strings.Split(strings.TrimPrefix(pat, "/"), "/") }

// intersect reports whether some path matches both segment patterns a and
// b, as MatchPath matches them: "*" one segment, a final "**" any rest.
func intersect(a, b []string) bool {
	for {
		switch {
		case len(a) == 1 && a[0] == "**", len(b) == 1 && b[0] == "**":
			return true
		case len(a) == 0 || len(b) == 0:
			return len(a) == len(b)
		case a[0] != "*" && b[0] != "*" && a[0] != b[0]:
			return false
		}
		a, b = a[1:], b[1:]
	}
}
