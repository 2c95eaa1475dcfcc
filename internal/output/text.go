package output

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// trimToRuneEnd drops an incomplete character cut at the end of b.
func trimToRuneEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// trimToRuneStart drops the continuation bytes of a character cut at the
// start of b.
func trimToRuneStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}

// isText reports whether b can be shown as text: valid UTF-8 without NUL.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

// Clip shortens s to about n bytes for a message, at a character boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimToRuneEnd([]byte(s[:n]))) + "..."
}

// lineEnd cuts b, the start of a longer text, after its last newline. When
// b has none, its first line is longer than b: b is cut at a character
// boundary instead, and cut reports that its last line is incomplete.
func lineEnd(b []byte) (head []byte, cut bool) {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[:i+1], false
	}
	return trimToRuneEnd(b), true
}

// lineStart cuts b, the end of a longer text, just after its first
// newline; afterNewline says that the byte before b is a newline, so b
// already starts a line. When b holds no newline before its last byte,
// its last line is longer than b: b is cut at a character boundary
// instead, and cut reports that its first line is incomplete.
func lineStart(b []byte, afterNewline bool) (tail []byte, cut bool) {
	if afterNewline {
		return b, false
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
		return b[i+1:], false
	}
	return trimToRuneStart(b), true
}

// linesIn counts the lines b holds or begins: its newlines, plus one for a
// last line without a newline.
func linesIn(b string) int64 {
	n := int64(strings.Count(b, "\n"))
	if b != "" && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
