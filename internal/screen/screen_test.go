package screen

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestScreen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cols     int
		input    string
		rows     []string
		col, row int
		alt      bool
	}{
		{"text and colours", 20, "hello \x1b[31mred\x1b[0m\r\nnext", []string{"hello red", "next"}, 4, 1, false},
		{"cursor moves and erase", 20, "abcdef\x1b[3D\x1b[K\x1b[2;5HX", []string{"abc", "    X"}, 5, 1, false},
		{"alternate screen", 20, "shell$ \x1b[?1049h\x1b[Hfull screen", []string{"full screen"}, 11, 0, true},
		{"alternate screen left", 20, "shell$ \x1b[?1049hfull\x1b[?1049l", []string{"shell$ "}, 7, 0, false},
		{"blanks after the cursor", 20, "a  \x1b[1D", []string{"a "}, 2, 0, false},
		{"scroll region", 10, "\x1b[4Hbottom\x1b[2;3r\x1b[2H1\r\n2\r\n3\r\n\x1b[r\x1b[Htop", []string{"top", "3", "", "bottom"}, 3, 0, false},
		{"wrap", 5, "abcdefg", []string{"abcde", "fg"}, 2, 1, false},
		{"queries answered by nobody", 20, "a\x1b[6n\x1b[c\x1b]0;title\x07\x1b[>cb", []string{"ab"}, 2, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.cols, 4)
			defer s.Close()
			s.Write([]byte(tc.input))
			got := s.Snapshot()
			if strings.Join(got.Rows, "|") != strings.Join(tc.rows, "|") || got.CursorCol != tc.col || got.CursorRow != tc.row || got.AltScreen != tc.alt {
				t.Errorf("got %q cursor %d,%d alt %v; want %q cursor %d,%d alt %v", got.Rows, got.CursorCol, got.CursorRow, got.AltScreen, tc.rows, tc.col, tc.row, tc.alt)
			}
		})
	}
}

// A closed screen shows what it showed as it closed, written after or
// not, and holds no emulator: the gateway keeps hundreds of finished
// sessions, and each emulator is some 5 MB.
func TestScreenClosed(t *testing.T) {
	s := New(20, 4)
	s.Write([]byte("$ seq 2\r\n1\r\n2\r\n$ "))
	s.Close()
	s.Write([]byte("after"))
	s.Resize(10, 2)
	got := s.Snapshot()
	want := []string{"$ seq 2", "1", "2", "$ "}
	if strings.Join(got.Rows, "|") != strings.Join(want, "|") || got.CursorCol != 2 || got.CursorRow != 3 {
		t.Errorf("closed screen %q cursor %d,%d; want %q cursor 2,3", got.Rows, got.CursorCol, got.CursorRow, want)
	}
	got.Rows[0] = "changed"
	if again := s.Snapshot(); again.Rows[0] != want[0] {
		t.Errorf("a snapshot's rows are the screen's: changed one, the next shows %q", again.Rows[0])
	}
	if s.emu != nil {
		t.Error("a closed screen keeps its emulator")
	}
	s.Close() // twice: nothing more
}

// A flood is taken as fast as it comes, in bounded memory, and the
// screen shows its end.
func TestScreenFlood(t *testing.T) {
	s := New(80, 24)
	defer s.Close()
	var line []byte
	for i := range 100 {
		line = fmt.Appendf(line[:0], "%08d %s\r\n", i, strings.Repeat("x", 60))
	}
	chunk := bytes.Repeat(line, 1<<14/len(line)+1)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 40 << 20 / len(chunk) {
		s.Write(chunk)
	}
	s.Write([]byte("the end\r\n"))
	got := s.Snapshot()
	if got.Resets == 0 {
		t.Error("40 MiB at once were rendered whole; want the backlog reset")
	}
	if i := len(got.Rows) - 1; got.Rows[i] != "" || got.Rows[i-1] != "the end" {
		t.Errorf("the screen ends %q; want the flood's last line", got.Rows[max(0, len(got.Rows)-3):])
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Errorf("the heap grew by %d bytes through the flood; want it bounded", grew)
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"Enter", "\r", true}, {"Ctrl-C", "\x03", true}, {"Ctrl-d", "\x04", true}, {"Ctrl-Z", "\x1a", true},
		{"Up", "\x1b[A", true}, {"F12", "\x1b[24~", true}, {"PageDown", "\x1b[6~", true}, {"Ctrl-[", "\x1b", true},
		{"Ctrl-1", "", false}, {"enter", "", false}, {"Ctrl-", "", false}, {"", "", false},
	} {
		got, err := Key(tc.name)
		if string(got) != tc.want || (err == nil) != tc.ok {
			t.Errorf("Key(%q) = %q, %v; want %q, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}

func TestOverlay(t *testing.T) {
	for _, tc := range []struct {
		name, input, held string
		rows              []string
	}{
		{"at a prompt", "$ ", "[REDACTED:a]", []string{"$ [REDACTED:a]"}},
		{"over what is there", "abcdef\x1b[4D", "XY", []string{"abXYef"}},
		{"a line break first", "done", "\r\n[REDACTED:a]", []string{"done", "[REDACTED:a]"}},
		{"controls dropped", "x", "\x1b\x07é", []string{"xé"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(20, 4)
			defer s.Close()
			s.Write([]byte(tc.input))
			got := s.Snapshot()
			col, row := got.CursorCol, got.CursorRow
			got.Overlay([]byte(tc.held))
			if strings.Join(got.Rows, "|") != strings.Join(tc.rows, "|") || got.CursorCol != col || got.CursorRow != row {
				t.Errorf("got %q cursor %d,%d; want %q, the cursor still at %d,%d", got.Rows, got.CursorCol, got.CursorRow, tc.rows, col, row)
			}
		})
	}
}
