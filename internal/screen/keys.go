package screen

import (
	"fmt"
	"slices"
	"strings"
)

// keys are the bytes an xterm sends for each named key (normal cursor
// mode: the mode most programs leave the keys in; those that switch to
// application mode accept these too).
var keys = map[string]string{
	"Enter": "\r", "Tab": "\t", "Escape": "\x1b", "Backspace": "\x7f", "Space": " ",
	"Up": "\x1b[A", "Down": "\x1b[B", "Right": "\x1b[C", "Left": "\x1b[D",
	"Home": "\x1b[H", "End": "\x1b[F", "Insert": "\x1b[2~", "Delete": "\x1b[3~",
	"PageUp": "\x1b[5~", "PageDown": "\x1b[6~",
	"F1": "\x1bOP", "F2": "\x1bOQ", "F3": "\x1bOR", "F4": "\x1bOS",
	"F5": "\x1b[15~", "F6": "\x1b[17~", "F7": "\x1b[18~", "F8": "\x1b[19~",
	"F9": "\x1b[20~", "F10": "\x1b[21~", "F11": "\x1b[23~", "F12": "\x1b[24~",
}

// KeyNames are the names Key knows, sorted; Ctrl-A to Ctrl-Z and
// Ctrl-[, Ctrl-\, Ctrl-], Ctrl-^, Ctrl-_ besides.
var KeyNames = slices.Sorted(func(yield func(string) bool) {
	for k := range keys {
		if !yield(k) {
			return
		}
	}
})

// Key returns the bytes the key name sends ("Enter", "Ctrl-C", "F5"), or
// an error that lists the names.
func Key(name string) ([]byte, error) {
	if b, ok := keys[name]; ok {
		return []byte(b), nil
	}
	if c, ok := strings.CutPrefix(name, "Ctrl-"); ok && len(c) == 1 {
		ch := c[0]
		if ch >= 'a' && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		if ch >= '@' && ch <= '_' {
			return []byte{ch - '@'}, nil
		}
	}
	return nil, fmt.Errorf("unknown key %q: want one of %s, or Ctrl-A to Ctrl-Z", clip(name), strings.Join(KeyNames, ", "))
}

// clip bounds a name quoted in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
