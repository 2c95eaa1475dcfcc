package policy

import (
	"regexp/syntax"
	"strings"
)

// RelativeProgram returns the program an allow_commands pattern names by a
// relative path ("./run.sh", "bin/deploy"), and whether it names one. The
// shell finds such a program from the command's directory, so whoever
// picks the directory picks the file that runs.
//
// What counts, for a regexp: the literal text that a match must begin
// with, taken for each alternative (through groups, anchors, optional and
// repeated parts), is split into shell words at blanks and at ;&|()<>;
// leading variable assignments (NAME=value) are skipped, and the next word
// is the program. It names a relative program when it contains a "/" but
// starts with neither "/" (absolute) nor "~" (the home directory, which
// no cwd changes). A program the pattern leaves to a class or a wildcard
// ("[.]/x" is a literal, "[a.]/x" and ".*" are not) is not judged: such a
// pattern names no program, and one that lets any program run needs no
// directory to do harm. Only the program is judged: an interpreter given
// a relative script ("sh run.sh") or a tool that reads its directory
// ("make") depends on the directory too, and is not found here.
func RelativeProgram(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	for _, p := range prefixes(re.Simplify()) {
		if prog := program(p.text); strings.Contains(prog, "/") && !strings.HasPrefix(prog, "/") && !strings.HasPrefix(prog, "~") {
			return prog, true
		}
	}
	return "", false
}

// prefix is literal text a match begins with; whole when the text is
// all that part of the pattern matches, so what follows it extends it.
type prefix struct {
	text  string
	whole bool
}

// maxPrefixes bounds the alternatives followed: a pattern of many
// alternations multiplies them.
const maxPrefixes = 64

// prefixes returns the literal texts that a match of re may begin with,
// one per alternative; a part that is not literal ends them.
func prefixes(re *syntax.Regexp) []prefix {
	switch re.Op {
	case syntax.OpLiteral:
		return []prefix{{string(re.Rune), true}}
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpBeginText, syntax.OpEndLine, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []prefix{{"", true}}
	case syntax.OpCapture:
		return prefixes(re.Sub[0])
	case syntax.OpQuest:
		return append(prefixes(re.Sub[0]), prefix{"", true})
	case syntax.OpPlus:
		ps := prefixes(re.Sub[0])
		for i := range ps {
			ps[i].whole = false // more of it may follow
		}
		return ps
	case syntax.OpAlternate:
		var ps []prefix
		for _, sub := range re.Sub {
			ps = append(ps, prefixes(sub)...)
		}
		return ps[:min(len(ps), maxPrefixes)]
	case syntax.OpConcat:
		ps := []prefix{{"", true}}
		for _, sub := range re.Sub {
			var next []prefix
			var subs []prefix // computed once, for the first whole prefix
			for _, p := range ps {
				if !p.whole {
					next = append(next, p)
					continue
				}
				if subs == nil {
					subs = prefixes(sub)
				}
				for _, s := range subs {
					next = append(next, prefix{p.text + s.text, s.whole})
				}
			}
			ps = next[:min(len(next), maxPrefixes)]
		}
		return ps
	}
	return []prefix{{"", false}} // a class, a wildcard, a star
}

// program returns the program of a command line's start: its first shell
// word after any NAME=value assignments.
func program(line string) string {
	words := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()<>", r) })
	for _, w := range words {
		if name, _, ok := strings.Cut(w, "="); ok && isName(name) {
			continue
		}
		return w
	}
	return ""
}

func isName(s string) bool {
	for i, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}
