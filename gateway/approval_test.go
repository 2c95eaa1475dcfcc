package gateway

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// plain redacts nothing.
func plain(s string) string { return s }

func TestShown(t *testing.T) {
	tests := []struct {
		in     string
		quoted bool
	}{
		{"systemctl restart nginx", false},
		{"echo héllo wörld", false},
		{"echo a\nrm -rf /", true},
		{"echo a\rrm -rf /", true},
		{"echo \x1b[2Jhidden", true},
		{"echo \u202eevil", true}, // a right-to-left override
		{"echo a\tb", true},
		{"echo \u00a0b", true}, // a space that is not a space
		{"echo\u202fb", true},  // found by FuzzShown: kept by strconv.QuoteToGraphic
		{"ls\u3164-la", true},  // a Hangul filler draws nothing
		{"cat a\ufe0f", true},  // nor does a variation selector
		{"echo a   b", false},  // a short run of spaces
		{"echo a    b", true},  // a longer one could push the rest out of view
		{"", false},
	}
	for _, tt := range tests {
		got := shown(plain, tt.in)
		if quoted := got != tt.in; quoted != tt.quoted {
			t.Errorf("shown(%q) = %q; quoted %v, want %v", tt.in, got, quoted, tt.quoted)
		}
	}
}

// FuzzShown: what a person is shown prints plainly on one line and says
// exactly what the agent sent.
func FuzzShown(f *testing.F) {
	for _, s := range []string{"ls", "a\nb", "\u202e", "\x00", "\xff", `"quoted"`, "a    b", "\u3164", "a\t    \"b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := shown(plain, s)
		if got == s {
			for _, r := range s {
				if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') || drawsNothing(r) {
					t.Fatalf("shown(%q) left %U as it is", s, r)
				}
			}
		}
		q, _, ok := strings.Cut(got, " (quoted: ")
		if strings.Contains(q, strings.Repeat(" ", maxSpaceRun+1)) {
			t.Fatalf("shown(%q) = %q holds a run of more than %d spaces", s, got, maxSpaceRun)
		}
		if got == s {
			return
		}
		if !ok {
			t.Fatalf("shown(%q) = %q: changed but not marked quoted", s, got)
		}
		for _, r := range q {
			if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("shown(%q) = %q holds %U", s, got, r)
			}
		}
		back, err := strconv.Unquote(q)
		if err != nil || (back != s && utf8.ValidString(s)) {
			t.Fatalf("shown(%q) = %q unquotes to %q, %v", s, got, back, err)
		}
	})
}

func TestQuestionKey(t *testing.T) {
	// Parts are length-prefixed: moving a byte across a boundary is
	// another action.
	pairs := [][2][]string{
		{{"ssh_exec", "t", "ab", "c"}, {"ssh_exec", "t", "a", "bc"}},
		{{"ssh_exec", "t", "a;", ""}, {"ssh_exec", "t", "a", ";"}},
		{{"x", "1:y"}, {"x1:", "y"}},
	}
	for _, p := range pairs {
		if questionKey(p[0]...) == questionKey(p[1]...) {
			t.Errorf("questionKey(%q) == questionKey(%q)", p[0], p[1])
		}
	}
	if questionKey("a", "b") != questionKey("a", "b") {
		t.Error("questionKey is not a function of its parts")
	}
}
