package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// event is one result of Reader.Next, flattened for comparison.
type event struct {
	frame    string
	oversize int64 // size of a discarded line; 0 for a frame
}

func (e event) String() string {
	if e.oversize > 0 {
		return fmt.Sprintf("oversize(%d)", e.oversize)
	}
	return fmt.Sprintf("frame(%q)", e.frame)
}

// readAll drains fr and checks the memory promise after every call.
func readAll(t testing.TB, fr *Reader) []event {
	t.Helper()
	var evs []event
	for {
		f, err := fr.Next()
		if cap(fr.frame) > fr.limit {
			t.Fatalf("frame buffer capacity %d; want at most the limit %d", cap(fr.frame), fr.limit)
		}
		var oe *OversizeError
		switch {
		case errors.As(err, &oe):
			if oe.Limit != fr.limit {
				t.Fatalf("OversizeError.Limit = %d; want %d", oe.Limit, fr.limit)
			}
			evs = append(evs, event{oversize: oe.Size})
		case err == io.EOF:
			return evs
		case err != nil:
			t.Fatalf("Next: %v", err)
		default:
			if len(f) > fr.limit {
				t.Fatalf("frame of %d bytes over the limit %d", len(f), fr.limit)
			}
			evs = append(evs, event{frame: string(f)})
		}
	}
}

// expectedEvents is the reference model: split on '\n', judge each line.
func expectedEvents(input []byte, limit int) []event {
	var evs []event
	lines := bytes.Split(input, []byte{'\n'})
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // input ended with '\n' (or was empty)
	}
	for _, l := range lines {
		if len(l) > limit {
			evs = append(evs, event{oversize: int64(len(l))})
			continue
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.Trim(l, " \t\r")) == 0 {
			continue
		}
		evs = append(evs, event{frame: string(l)})
	}
	return evs
}

func TestReaderNext(t *testing.T) {
	tests := []struct {
		name  string
		input string
		limit int
		want  []event
	}{
		{"one frame", "{}\n", 10, []event{{frame: "{}"}}},
		{"crlf", "{\"a\":1}\r\n{}\n", 10, []event{{frame: `{"a":1}`}, {frame: "{}"}}},
		{"no final newline", "{}\n[1]", 10, []event{{frame: "{}"}, {frame: "[1]"}}},
		{"blank lines skipped", "\n \t\r\n{}\n\n", 10, []event{{frame: "{}"}}},
		{"exactly the limit", "0123456789\n", 10, []event{{frame: "0123456789"}}},
		{"one over the limit", "0123456789A\n{}\n", 10, []event{{oversize: 11}, {frame: "{}"}}},
		{"cr counts toward the limit", "0123456789\r\n", 10, []event{{oversize: 11}}},
		{"oversize at end of stream", "{}\n0123456789ABC", 10, []event{{frame: "{}"}, {oversize: 13}}},
		{"two oversize in a row", strings.Repeat("x", 25) + "\n" + strings.Repeat("y", 12) + "\nok\n", 10,
			[]event{{oversize: 25}, {oversize: 12}, {frame: "ok"}}},
		{"empty input", "", 10, nil},
		{"multibyte kept whole", "\"é漢🙂\"\n", 16, []event{{frame: "\"é漢🙂\""}}},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{1, 3, 7, 4096} {
			t.Run(fmt.Sprintf("%s/buf%d", tt.name, bufSize), func(t *testing.T) {
				fr := newReaderSize(strings.NewReader(tt.input), tt.limit, nil, bufSize)
				got := readAll(t, fr)
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("got %v; want %v", got, tt.want)
				}
			})
		}
	}
}

func TestReaderMetrics(t *testing.T) {
	var m Metrics
	input := "{}\n" + strings.Repeat("x", 20) + "\n{\"abc\":1}\n"
	readAll(t, NewReader(iotest.OneByteReader(strings.NewReader(input)), 10, &m))
	got := m.Snapshot()
	want := Snapshot{StdinBytes: int64(len(input)), FramesIn: 2, LargestFrameIn: 9, OversizeFrames: 1}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func TestReaderPassesReadError(t *testing.T) {
	boom := errors.New("boom")
	fr := NewReader(io.MultiReader(strings.NewReader("{}\n{\"partial"), iotest.ErrReader(boom)), 100, nil)
	if f, err := fr.Next(); err != nil || string(f) != "{}" {
		t.Fatalf("Next = %q, %v; want \"{}\", nil", f, err)
	}
	// The partial last line is still delivered before the error.
	if f, err := fr.Next(); err != nil || string(f) != `{"partial` {
		t.Fatalf("Next = %q, %v; want the partial line", f, err)
	}
	if _, err := fr.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next error = %v; want %v", err, boom)
	}
}

// chunkReader returns the input in chunks whose sizes cycle through sizes.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzReader feeds any bytes in any chunking under any limit and checks the
// frames against a line-splitting reference: complete frames come out byte
// for byte, oversize lines are reported with their exact size, the frame
// buffer never exceeds the limit, and nothing panics.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"), []byte{0}, uint16(64), uint8(16))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaa\nb\r\n\n  \nccc"), []byte{2, 5, 0}, uint16(4), uint8(3))
	f.Add([]byte("\"é漢🙂\\\"\"\n[1,2]\n"), []byte{1}, uint16(7), uint8(1))
	f.Fuzz(func(t *testing.T, input, sizes []byte, limit uint16, bufSize uint8) {
		lim := int(limit%512) + 1
		fr := newReaderSize(&chunkReader{data: input, sizes: sizes}, lim, nil, int(bufSize%64)+1)
		got := readAll(t, fr)
		want := expectedEvents(input, lim)
		if len(got) != len(want) {
			t.Fatalf("got %d events %v; want %d %v", len(got), got, len(want), want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("event %d: got %v; want %v", i, got[i], want[i])
			}
		}
	})
}

func TestErrorFrame(t *testing.T) {
	got := string(ErrorFrame(-32700, "parse error", map[string]int{"limit": 3}))
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":{"limit":3}}}` + "\n"
	if got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}
