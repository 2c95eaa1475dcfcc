package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DeniedError is a policy denial. It names the target and the rule so the
// agent can correct its call.
type DeniedError struct {
	Target string
	Rule   string // e.g. `deny_commands[0] "rm "` or "allow_commands"
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied by policy of target %q: %s (%s)", e.Target, e.Reason, e.Rule)
}

// Commands holds the compiled command rules of one SSH target.
type Commands struct {
	target string
	allow  []rule
	deny   []rule
}

type rule struct {
	source string
	re     *regexp.Regexp
}

// CompileCommands compiles allow and deny patterns. Allow patterns are
// anchored at both ends, so they must match the whole command.
func CompileCommands(target string, allow, deny []string) (*Commands, error) {
	c := &Commands{target: target}
	for i, p := range allow {
		// Compiled alone first: a pattern whose parentheses do not
		// balance, such as "ls)|(.*", would close the anchoring group
		// early and, anchored, allow any command.
		re, err := regexp.Compile(p)
		if err == nil {
			re, err = regexp.Compile(`^(?:` + p + `)$`)
		}
		if err != nil {
			return nil, fmt.Errorf("allow_commands[%d]: %w", i, err)
		}
		c.allow = append(c.allow, rule{p, re})
	}
	for i, p := range deny {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("deny_commands[%d]: %w", i, err)
		}
		c.deny = append(c.deny, rule{p, re})
	}
	return c, nil
}

// Check returns nil when command may run, else a *DeniedError.
func (c *Commands) Check(command string) error {
	listed, err := c.Listed(command)
	if err != nil || listed {
		return err
	}
	return &DeniedError{Target: c.target, Rule: "allow_commands " + quoteAll(c.allow),
		Reason: "the whole command must match one allow pattern"}
}

// Listed returns a *DeniedError when the deny rules refuse command (or it
// is empty), and otherwise whether the allow rules let it run by
// themselves: a target that asks a person for the rest (approve =
// "unlisted") asks for a command that is not listed.
func (c *Commands) Listed(command string) (bool, error) {
	if command == "" {
		return false, &DeniedError{Target: c.target, Rule: "command", Reason: "the command is empty"}
	}
	for i, r := range c.deny {
		if r.re.MatchString(command) {
			return false, &DeniedError{Target: c.target, Rule: fmt.Sprintf("deny_commands[%d] %q", i, r.source),
				Reason: "the command matches a deny pattern"}
		}
	}
	if len(c.allow) == 0 {
		return true, nil
	}
	for _, r := range c.allow {
		if r.re.MatchString(command) {
			return true, nil
		}
	}
	return false, nil
}

func quoteAll(rules []rule) string {
	q := make([]string, len(rules))
	for i, r := range rules {
		q[i] = fmt.Sprintf("%q", r.source)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Requests holds the method and path rules of one HTTP endpoint.
type Requests struct {
	Target  string
	Methods []string // upper case
	Paths   []string // patterns for MatchPath; empty allows any path
}

// Check returns nil when method and path (relative to the base URL, already
// normalized) are allowed, else a *DeniedError.
func (r *Requests) Check(method, path string) error {
	if !slices.Contains(r.Methods, strings.ToUpper(method)) {
		return &DeniedError{Target: r.Target, Rule: fmt.Sprintf("methods %q", r.Methods),
			Reason: fmt.Sprintf("method %s is not allowed", method)}
	}
	if len(r.Paths) == 0 {
		return nil
	}
	for _, p := range r.Paths {
		if MatchPath(p, path) {
			return nil
		}
	}
	return &DeniedError{Target: r.Target, Rule: fmt.Sprintf("paths %q", r.Paths),
		Reason: fmt.Sprintf("path %s matches no allowed pattern", path)}
}

// MatchPath reports whether path matches pattern, segment by segment: "*"
// matches one whole segment, "**" (as the last segment) matches any rest,
// including none, and other segments match literally.
func MatchPath(pattern, path string) bool {
	ps := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	xs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, p := range ps {
		if p == "**" && i == len(ps)-1 {
			return true
		}
		if i >= len(xs) || (p != "*" && p != xs[i]) || (p == "*" && xs[i] == "") {
			return false
		}
	}
	return len(ps) == len(xs)
}
