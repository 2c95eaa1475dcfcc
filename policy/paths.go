package policy

import (
	"fmt"
	"path"
	"strings"
)

// Paths holds the file path rules of one SSH target, for file transfers.
// Patterns are MatchPath patterns on absolute, clean paths: "*" matches one
// whole segment and a final "**" matches a directory and everything under
// it ("/srv/app/**" matches "/srv/app" too). A "*" or "?" inside a segment
// is no wildcard: Validate refuses it, so that a deny rule such as
// "/etc/*.key" cannot silently match nothing.
type Paths struct {
	Target string
	// Allow lists the only paths allowed; empty allows none, which turns
	// file transfers off: a target whose commands are restricted must not
	// get every file (~/.bashrc, authorized_keys) by default.
	Allow []string
	// Deny lists paths refused whatever Allow says, with everything under
	// them: a denied directory ("/home/u/.ssh") denies its files.
	Deny []string
}

// Validate reports the first pattern that Check could not honour, naming
// its field and index.
func (p *Paths) Validate() error {
	for _, l := range []struct {
		field    string
		patterns []string
	}{{"allow_paths", p.Allow}, {"deny_paths", p.Deny}} {
		for i, pat := range l.patterns {
			if why := badPattern(pat); why != "" {
				return fmt.Errorf("%s[%d] %q: %s", l.field, i, pat, why)
			}
		}
	}
	return nil
}

func badPattern(pat string) string {
	if why := badPath(pat); why != "" {
		return why
	}
	segs := strings.Split(strings.TrimPrefix(pat, "/"), "/")
	for i, s := range segs {
		switch {
		case s == "**" && i != len(segs)-1:
			return `"**" may only be the last segment`
		case s != "*" && s != "**" && strings.ContainsAny(s, "*?["):
			return `wildcards match whole segments only: use "*" for one segment or a final "**" for a directory and all under it`
		}
	}
	return ""
}

// badPath says why path is not an absolute, clean path, or "".
func badPath(p string) string {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "it contains a NUL byte"
	case !strings.HasPrefix(p, "/"):
		return "it is not an absolute path"
	case path.Clean(p) != p:
		return fmt.Sprintf("it is not a clean path (%q is)", path.Clean(p))
	}
	return ""
}

// Check returns nil when the absolute, clean path p may be transferred,
// else a *DeniedError. Callers pass the path the server resolved (symlinks
// followed), so that a link cannot lead out of an allowed directory. A
// pattern that Validate refuses denies every path (fail closed).
func (p *Paths) Check(pth string) error {
	if why := badPath(pth); why != "" {
		return &DeniedError{Target: p.Target, Rule: "path", Reason: fmt.Sprintf("path %q is refused: %s", pth, why)}
	}
	if err := p.Validate(); err != nil {
		return &DeniedError{Target: p.Target, Rule: "paths", Reason: fmt.Sprintf("the target's path rules are invalid, so every path is denied: %v", err)}
	}
	for i, pat := range p.Deny {
		if matchesOrIsUnder(pat, pth) {
			return &DeniedError{Target: p.Target, Rule: fmt.Sprintf("deny_paths[%d] %q", i, pat),
				Reason: fmt.Sprintf("path %s matches a deny pattern", pth)}
		}
	}
	if len(p.Allow) == 0 {
		return &DeniedError{Target: p.Target, Rule: "allow_paths",
			Reason: "file transfers are off on this target: its config sets no allow_paths"}
	}
	for _, pat := range p.Allow {
		if MatchPath(pat, pth) {
			return nil
		}
	}
	return &DeniedError{Target: p.Target, Rule: fmt.Sprintf("allow_paths %q", p.Allow),
		Reason: fmt.Sprintf("path %s matches no allowed pattern", pth)}
}

// matchesOrIsUnder reports whether pat matches the absolute, clean path p
// or a directory above it.
func matchesOrIsUnder(pat, p string) bool {
	for {
		if MatchPath(pat, p) {
			return true
		}
		if p == "/" {
			return false
		}
		p = path.Dir(p)
	}
}
