package output

import (
	"bytes"
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
