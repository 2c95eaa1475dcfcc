package screen

import (
	"bytes"
	"strings"
	"testing"
)

var guarded = []Secret{{"pw", []byte("s3cr3t-value")}, {"other", []byte("abcdef")}}

// guard filters the chunks through a Guard and returns what it wrote.
func guard(chunks [][]byte, cut bool) string {
	var out bytes.Buffer
	g := NewGuard(&out, guarded)
	for _, c := range chunks {
		g.Write(c)
	}
	g.Close(cut)
	return out.String()
}

// each returns s as one chunk a byte.
func each(s string) [][]byte {
	var c [][]byte
	for i := range len(s) {
		c = append(c, []byte{s[i]})
	}
	return c
}

func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "x s3cr3t-value y", "x [REDACTED:pw] y"},
		{"codes between", "x s\x1b[0m3\x1b[0mc\x1b[31mr\x1b]0;t\x073t-value y", "x [REDACTED:pw] y"},
		{"charset and string codes", "s\x1b(B3\x1bPq\x1b\\cr3t-value", "[REDACTED:pw]"},
		{"control bytes between", "s\x003cr\x0e3t-value!", "[REDACTED:pw]!"},
		{"not a secret", "s3cr3t-valu", "s3cr3t-valu"},
		{"broken by a newline", "s3cr\n3t-value", "s3cr\n3t-value"},
		{"codes kept elsewhere", "\x1b[1mbold\x1b[0m abcdef", "\x1b[1mbold\x1b[0m [REDACTED:other]"},
		{"overlapping start", "ss3cr3t-value", "s[REDACTED:pw]"},
		{"retyped", "sX\b3cr3t-value", "[REDACTED:pw]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := guard([][]byte{[]byte(tc.in)}, false); got != tc.want {
				t.Errorf("whole: got %q; want %q", got, tc.want)
			}
			if strings.Contains(tc.in, "\b") {
				return // a backspace can only take back what is still held
			}
			if got := guard(each(tc.in), false); got != tc.want {
				t.Errorf("a byte a write: got %q; want %q", got, tc.want)
			}
		})
	}
	if got := guard([][]byte{[]byte("x s3c")}, true); got != "x [REDACTED]" {
		t.Errorf("cut in a candidate: got %q; want it replaced", got)
	}
	if got := guard([][]byte{[]byte("x s3c")}, false); got != "x s3c" {
		t.Errorf("ended in a candidate: got %q; want it kept", got)
	}
}

// visibleOf is the visible projection the Guard matches in.
func visibleOf(b []byte) []byte {
	g := &Guard{}
	var v []byte
	for _, c := range b {
		g.held = append(g.held, c)
		if g.visible(c) {
			v = append(v, c)
		}
	}
	return v
}

// FuzzGuard: whatever the stream and its splits (backspaces aside, which
// can only take back what is held), the Guard writes the same, and no
// secret is left visible in it.
func FuzzGuard(f *testing.F) {
	f.Add([]byte("x s\x1b[0m3cr3t-value y"), uint8(1))
	f.Add([]byte("abc\x1b]0;abcdef\x07def"), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		in = bytes.ReplaceAll(in, []byte("\b"), nil)
		n := int(split%16) + 1
		var chunks [][]byte
		for b := in; len(b) > 0; b = b[min(n, len(b)):] {
			chunks = append(chunks, b[:min(n, len(b))])
		}
		whole, split2 := guard([][]byte{in}, false), guard(chunks, false)
		if whole != split2 {
			t.Fatalf("whole %q; in chunks of %d %q", whole, n, split2)
		}
		if len(in) < maxHeld {
			for _, s := range guarded {
				if bytes.Contains(visibleOf([]byte(whole)), s.Value) {
					t.Fatalf("%q shows %s: %q", in, s.Name, whole)
				}
			}
		}
	})
}
