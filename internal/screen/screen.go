package screen

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/vt"
)

// MaxBacklog is how much output not yet rendered a Screen holds; past
// it, the screen is reset and rendered from the last KeepOnReset bytes.
// The emulator renders a few MB/s: a backlog renders within a fraction
// of a second.
const (
	MaxBacklog  = 64 << 10
	KeepOnReset = 16 << 10
)

// A Screen renders a terminal's output. Write only queues (it never
// waits for the emulator, whatever a flood costs it); Snapshot renders
// what was queued. Close stops its goroutine and waits for it, and lets
// go of the emulator: a closed screen keeps only its last Text.
type Screen struct {
	mu      sync.Mutex
	pending []byte
	resets  int  // backlog overflows so far
	reset   bool // the pending bytes start from a reset terminal
	closed  bool

	emuMu   sync.Mutex // the emulator, and the rendering of pending into it
	emu     *vt.Emulator
	spare   []byte
	replies sync.WaitGroup
	last    Text // once closed (emu nil): what it showed
}

// New returns a screen of cols columns and rows rows.
func New(cols, rows int) *Screen {
	s := &Screen{emu: vt.NewEmulator(max(cols, 1), max(rows, 1))}
	s.emu.SetScrollbackSize(1) // rows that scroll off are in the transcript (0 would mean its default, 10000)
	// What the emulator answers to the program's queries (device
	// attributes, the cursor's position, colours) is read and dropped:
	// it is never typed into the session, and never shown.
	s.replies.Go(func() { io.Copy(io.Discard, s.emu) })
	return s
}

// Write queues p for rendering. It always returns len(p), nil.
func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	s.pending = append(s.pending, p...)
	if len(s.pending) > MaxBacklog {
		// A flood: what it overwrote is gone from a real screen too. Keep
		// its end, from a line's start where there is one.
		keep := s.pending[len(s.pending)-KeepOnReset:]
		if i := bytes.IndexByte(keep, '\n'); i >= 0 {
			keep = keep[i+1:]
		}
		s.pending = append(s.pending[:0], keep...)
		s.reset = true
		s.resets++
	}
	return len(p), nil
}

// render feeds what is queued to the emulator; emuMu is held.
func (s *Screen) render() {
	s.mu.Lock()
	batch, reset := s.pending, s.reset
	s.pending, s.reset = s.spare[:0], false
	s.mu.Unlock()
	if reset {
		s.emu.Write([]byte("\x1bc")) // RIS: a terminal as new
	}
	s.emu.Write(batch)
	s.spare = batch
}

// Resize changes the screen's size, after what was written so far.
func (s *Screen) Resize(cols, rows int) {
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	if s.emu == nil {
		return // closed
	}
	s.render()
	s.emu.Resize(max(cols, 1), max(rows, 1))
}

// Text is a rendered screen: its rows, plain text without trailing
// blanks (but those before the cursor), and the cursor (0-based column
// and row).
type Text struct {
	Rows      []string `json:"rows"`
	CursorCol int      `json:"cursor_col"`
	CursorRow int      `json:"cursor_row"`
	// AltScreen is set while a full-screen program (less, vim, top) has
	// the alternate screen.
	AltScreen bool `json:"alt_screen,omitempty"`
	// Resets counts the floods whose start was never rendered: the
	// screen then shows what their last bytes drew on a reset terminal.
	Resets int `json:"resets,omitempty"`
}

// String is the rows, one a line.
func (t Text) String() string { return strings.Join(t.Rows, "\n") }

// Overlay draws held over the rows from the cursor on: bytes the screen
// was not fed yet (what a redacting stream in front of it holds back, a
// marker in place of a possible secret), as plain text, "\r" and "\n"
// moving to the row's start and to the next row, other control bytes
// dropped. The cursor stays where it is: the program's own screen has
// not drawn them.
func (t *Text) Overlay(held []byte) {
	row, col := t.CursorRow, t.CursorCol
	for _, r := range string(held) {
		switch {
		case r == '\r':
			col = 0
		case r == '\n':
			row++
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
		default:
			for len(t.Rows) <= row {
				t.Rows = append(t.Rows, "")
			}
			cells := []rune(t.Rows[row])
			for len(cells) <= col {
				cells = append(cells, ' ')
			}
			cells[col] = r
			t.Rows[row] = string(cells)
			col++
		}
	}
}

// Snapshot renders the screen once everything written so far is
// rendered. Trailing blank rows are left out.
func (s *Screen) Snapshot() Text {
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	if s.emu == nil {
		t := s.last
		t.Rows = slices.Clone(t.Rows)
		return t
	}
	return s.snapshot()
}

// snapshot is Snapshot of the open screen; emuMu is held.
func (s *Screen) snapshot() Text {
	s.render()
	rows := strings.Split(s.emu.String(), "\n")
	pos := s.emu.CursorPosition()
	alt := s.emu.IsAltScreen()
	for i, r := range rows {
		t := strings.TrimRight(r, " ")
		if n := utf8.RuneCountInString(t); i == pos.Y && n < pos.X {
			// The blanks before the cursor stay: a prompt's "$ ".
			t += strings.Repeat(" ", pos.X-n)
		}
		rows[i] = t
	}
	for len(rows) > 0 && rows[len(rows)-1] == "" && len(rows)-1 > pos.Y {
		rows = rows[:len(rows)-1]
	}
	s.mu.Lock()
	resets := s.resets
	s.mu.Unlock()
	return Text{Rows: rows, CursorCol: pos.X, CursorRow: pos.Y, AltScreen: alt, Resets: resets}
}

// Close stops the screen's goroutine and waits for it, and lets go of
// the emulator, some 5 MB (its parser's buffer of 4 MiB, its screens),
// which the gateway's finished sessions kept, hundreds of them, until
// they were forgotten. Later Snapshots return what it showed as it closed.
func (s *Screen) Close() {
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if closed {
		return
	}
	// Not emu.Close, whose flag races with the reader's Read: the pipe's
	// writing end, closed, ends the reader with end of file, and what the
	// emulator answers after that is dropped.
	s.emuMu.Lock()
	last := s.snapshot()
	if c, ok := s.emu.InputPipe().(io.Closer); ok {
		c.Close()
	}
	s.emuMu.Unlock()
	s.replies.Wait()
	s.emuMu.Lock()
	s.emu, s.spare, s.last = nil, nil, last
	s.emuMu.Unlock()
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
}
