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
	frame      string
	oversize   int64  // size of a discarded line; 0 for a frame
	head, tail string // the ends kept of a discarded line
}

func (e event) String() string {
	if e.oversize > 0 {
		return fmt.Sprintf("oversize(%d, %q…%q)", e.oversize, e.head, e.tail)
	}
	return fmt.Sprintf("frame(%q)", e.frame)
}

// sizes is evs without the ends of discarded lines.
func sizes(evs []event) []event {
	out := make([]event, len(evs))
	for i, e := range evs {
		out[i] = event{frame: e.frame, oversize: e.oversize}
	}
	return out
}

// readAll drains fr and checks the memory promise after every call.
func readAll(t testing.TB, fr *Reader) []event {
	t.Helper()
	var evs []event
	for {
		f, err := fr.Next()
		if cap(fr.frame) > fr.limit || fr.chunked > fr.limit {
			t.Fatalf("frame buffer capacity %d, %d bytes in chunks; want at most the limit %d", cap(fr.frame), fr.chunked, fr.limit)
		}
		var oe *OversizeError
		switch {
		case errors.As(err, &oe):
			if oe.Limit != fr.limit {
				t.Fatalf("OversizeError.Limit = %d; want %d", oe.Limit, fr.limit)
			}
			evs = append(evs, event{oversize: oe.Size, head: string(oe.Head), tail: string(oe.Tail)})
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
			evs = append(evs, event{oversize: int64(len(l)),
				head: string(l[:min(keepEnds, limit)]), tail: string(l[max(0, len(l)-keepEnds):])})
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
			for _, spillAt := range []int{keepFrameCap, 2} {
				t.Run(fmt.Sprintf("%s/buf%d/spill%d", tt.name, bufSize, spillAt), func(t *testing.T) {
					fr := newReaderSize(strings.NewReader(tt.input), tt.limit, nil, bufSize)
					fr.spillAt = spillAt
					got := sizes(readAll(t, fr))
					if fmt.Sprint(got) != fmt.Sprint(tt.want) {
						t.Errorf("got %v; want %v", got, tt.want)
					}
				})
			}
		}
	}
}

// TestReaderOversizeEnds: a discarded line keeps its first bytes (no more
// than the limit) and its last, however it was read, and they give its id
// when it stands at either end.
func TestReaderOversizeEnds(t *testing.T) {
	pad := strings.Repeat("x", 3*keepEnds)
	tests := []struct {
		name   string
		line   string
		limit  int
		wantID string // "" wants none
	}{
		{"id first", `{"jsonrpc":"2.0","id":41,"method":"ping","params":{"p":"` + pad + `"}}`, 2 * keepEnds, `41`},
		{"id last", `{"method":"ping","params":{"p":"` + pad + `"},"jsonrpc":"2.0","id":"last"}`, 2 * keepEnds, `"last"`},
		{"id in the middle", `{"a":"` + pad + `","id":7,"b":"` + pad + `"}`, 2 * keepEnds, ""},
		{"a limit under the kept head", `{"id":3,"p":"` + pad + `"}`, 40, `3`},
		{"a limit that cuts the id", `{"id":12345,"p":"` + pad + `"}`, 8, ""},
		{"just over the limit, id last", `{"p":"x","id":99}`, 16, `99`},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{1, 7, 4096} {
			fr := newReaderSize(strings.NewReader(tt.line+"\r\n{}\n"), tt.limit, nil, bufSize)
			fr.spillAt = 1 + bufSize%5 // the line goes on in chunks at once
			_, err := fr.Next()
			var oe *OversizeError
			if !errors.As(err, &oe) {
				t.Fatalf("%s: got %v; want an OversizeError", tt.name, err)
			}
			line := tt.line + "\r"
			wantHead, wantTail := line[:min(keepEnds, tt.limit)], line[max(0, len(line)-keepEnds):]
			if string(oe.Head) != wantHead || string(oe.Tail) != wantTail || string(oe.ID()) != tt.wantID {
				t.Errorf("%s/buf%d: got head %q, tail %q, id %q; want %q, %q, %q", tt.name, bufSize, oe.Head, oe.Tail, oe.ID(), wantHead, wantTail, tt.wantID)
			}
			if f, err := fr.Next(); err != nil || string(f) != "{}" {
				t.Errorf("%s/buf%d: the next frame: got %q, %v", tt.name, bufSize, f, err)
			}
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
// for byte, oversize lines are reported with their exact size and ends,
// the frame buffer never exceeds the limit, and nothing panics. A large
// limit's high bits make lines go on in chunks early.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"), []byte{0}, uint16(64), uint8(16))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaa\nb\r\n\n  \nccc"), []byte{2, 5, 0}, uint16(4), uint8(3))
	f.Add([]byte("\"é漢🙂\\\"\"\n[1,2]\n"), []byte{1}, uint16(7), uint8(1))
	f.Add([]byte(`{"method":"ping","params":{"p":"`+strings.Repeat("x", 3000)+`"},"id":1}`+"\r\n{}"), []byte{200, 3}, uint16(500), uint8(63))
	f.Fuzz(func(t *testing.T, input, sizes []byte, limit uint16, bufSize uint8) {
		lim := int(limit%512) + 1
		fr := newReaderSize(&chunkReader{data: input, sizes: sizes}, lim, nil, int(bufSize%64)+1)
		if s := int(limit >> 9); s > 0 {
			fr.spillAt = s // the part of a line past s goes on in chunks
		}
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
	got := string(ErrorFrame(nil, -32700, "parse error", map[string]int{"limit": 3}))
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":{"limit":3}}}` + "\n"
	if got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}

// TestReaderOwned: a frame Owned calls the caller's keeps its bytes while
// the reader goes on, whatever the read size and spill point; a line
// longer than the frame buffer is one, and one the buffer held is not,
// also after a long blank line (skipped, never returned).
func TestReaderOwned(t *testing.T) {
	var input strings.Builder
	var lines []string
	for i, n := range []int{keepFrameCap + 1, 10, 3 * chunkSize, 300, keepFrameCap, 2*chunkSize + 7, 5} {
		line := strings.Repeat(string(rune('a'+i)), n)
		lines = append(lines, line)
		input.WriteString(line + "\n")
		if i == 2 || i == 3 {
			input.WriteString(strings.Repeat(" ", keepFrameCap+5) + "\n")
		}
	}
	for _, bufSize := range []int{7, 4096, readBufSize} {
		for _, spillAt := range []int{keepFrameCap, 2} {
			t.Run(fmt.Sprintf("buf%d/spill%d", bufSize, spillAt), func(t *testing.T) {
				fr := newReaderSize(strings.NewReader(input.String()), 4*chunkSize, nil, bufSize)
				fr.spillAt = spillAt
				kept := map[int][]byte{}
				for i, want := range lines {
					frame, err := fr.Next()
					if err != nil || string(frame) != want {
						t.Fatalf("frame %d: %d bytes, %v; want %d bytes", i, len(frame), err, len(want))
					}
					if fr.Owned() {
						kept[i] = frame
					}
					if spillAt == keepFrameCap && (len(want) > keepFrameCap) != fr.Owned() {
						t.Errorf("frame %d of %d bytes: Owned() = %v", i, len(want), fr.Owned())
					}
				}
				if _, err := fr.Next(); err != io.EOF {
					t.Fatalf("after the last frame: %v; want EOF", err)
				}
				for i, frame := range kept {
					if string(frame) != lines[i] {
						t.Errorf("frame %d, owned, changed after later reads", i)
					}
				}
			})
		}
	}
}
