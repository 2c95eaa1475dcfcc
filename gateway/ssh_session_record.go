package gateway

import (
	"encoding/json"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// A session's recording: an asciicast v2 file (a JSON header line, then
// one [seconds, code, data] line an event: "o" output, "i" input, "r" a
// resize, "m" a marker), written into the session's "recording" stream,
// whose capture redacts, hashes (the sha256 in the audit outcome) and
// spools it like every stream. What it records of the output comes
// redacted already; input text is redacted by the capture, a secret
// typed is a marker that names it, never its value.
type recorder struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	carry []byte // the start of a character split between two writes
}

func newRecorder(w io.Writer, cols, rows int) *recorder {
	r := &recorder{w: w, start: time.Now()}
	header, _ := json.Marshal(map[string]any{"version": 2, "width": cols, "height": rows,
		"timestamp": r.start.Unix(), "env": map[string]string{"TERM": "xterm-256color"}})
	w.Write(append(header, '\n'))
	return r
}

// event writes one event line.
func (r *recorder) event(code, data string) {
	line, _ := json.Marshal([]any{time.Since(r.start).Seconds(), code, data})
	r.w.Write(append(line, '\n'))
}

// output records b, the terminal's output, whole characters only.
func (r *recorder) output(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.carry) > 0 {
		b = append(r.carry, b...)
		r.carry = nil
	}
	// A character cut at the end waits for its rest (at most 3 bytes).
	for i := len(b) - 1; i >= max(0, len(b)-3); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				r.carry = append([]byte(nil), b[i:]...)
				b = b[:i]
			}
			break
		}
	}
	if len(b) > 0 {
		r.event("o", string(b))
	}
}

// input records what a send typed: the text and the keys' bytes, and a
// secret by its name.
func (r *recorder) input(text, secret string, keys []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if text != "" {
		r.event("i", text)
	}
	if secret != "" {
		r.event("m", "secret "+secret+" typed")
	}
	if len(keys) > 0 {
		r.event("i", string(keys))
	}
}

// plainText is terminal output without its escape sequences and the
// control bytes a model has no use for: what the text of a send shows.
func plainText(b []byte) string {
	s := ansi.Strip(string(b))
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
