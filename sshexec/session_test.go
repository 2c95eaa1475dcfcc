package sshexec

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// chunkReader returns data in reads of at most n bytes.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// copyMarked runs the marker stream copy over stream read in chunks.
func copyMarked(stream []byte, chunk int) (out []byte, pgid int64) {
	s := &session{pgidDecided: make(chan struct{})}
	var buf bytes.Buffer
	s.readers.Add(1)
	s.copy(&buf, &chunkReader{stream, chunk}, true, 0)
	s.decide(wrapperInfo{})
	return buf.Bytes(), s.wrapper.pgid
}

// FuzzMarker checks, for any remote stream and any read sizes, that the
// wrapper's line is removed and nothing else is lost, added or reordered;
// remote output is untrusted input.
func FuzzMarker(f *testing.F) {
	f.Add([]byte("motd\n"), []byte("hello\n"), uint32(1234), uint8(3))
	f.Add([]byte(""), []byte(pgidMarker+"99\nx"), uint32(7), uint8(1))
	f.Add([]byte(pgidMarker), []byte("\n"), uint32(0), uint8(200))
	f.Fuzz(func(t *testing.T, before, after []byte, pgid uint32, chunk uint8) {
		line := fmt.Sprintf("%s%d\n", pgidMarker, pgid)
		stream := append(append(append([]byte{}, before...), line...), after...)
		out, got := copyMarked(stream, int(chunk)+1)

		if got == 0 {
			// Not recognised: only allowed when the line could not be
			// found in time or held no usable group; nothing is dropped.
			if !bytes.Equal(out, stream) && !bytes.Contains(before, []byte(pgidMarker)) && pgid > 1 && len(before)+len(line) <= maxMarkerScan {
				t.Fatalf("marker line at %d lost without a group: got %q from %q", len(before), out, stream)
			}
			return
		}
		// The first complete marker line was removed, and only it.
		i := bytes.Index(stream, []byte(pgidMarker))
		nl := bytes.IndexByte(stream[i:], '\n')
		want := append(append([]byte{}, stream[:i]...), stream[i+nl+1:]...)
		if !bytes.Equal(out, want) {
			t.Fatalf("got %q; want %q", out, want)
		}
		if !bytes.Contains(before, []byte(pgidMarker)) && got != int64(pgid) {
			t.Fatalf("pgid: got %d; want %d", got, pgid)
		}
	})
}

func TestMarkerNotFound(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
	}{
		{"plain stderr", "error: something\n"},
		{"empty", ""},
		{"partial marker", pgidMarker + "12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, pgid := copyMarked([]byte(tc.stream), 7)
			if string(out) != tc.stream || pgid != 0 {
				t.Errorf("got %q, %d; want the stream unchanged and no group", out, pgid)
			}
		})
	}
}

// FuzzReaped checks, for any remote output and read sizes, that the
// supervisor's lines are removed and nothing else, and that the session
// counts as reaped only when the stream ends with the supervisor's last
// line and its nonce: a command's output (untrusted) that forges one with
// another nonce, or anywhere but at the end, changes nothing.
func FuzzReaped(f *testing.F) {
	f.Add([]byte("out\n"), []byte(reapedMarker+"n0nce\n"), true, uint8(3))
	f.Add([]byte(""), []byte(""), true, uint8(1))
	f.Add([]byte(reapedMarker+"abc\n"), []byte("tail"), false, uint8(200))
	f.Fuzz(func(t *testing.T, output, forged []byte, last bool, chunk uint8) {
		const nonce = "abc"
		head := subMarker + nonce + "\n" + pgidMarker + "42 armed=1 sub=1 start=7\n"
		body := append(append([]byte{}, output...), forged...)
		stream := append([]byte(head), body...)
		if last {
			stream = append(stream, reapedMarker+nonce+"\n"...)
		}
		s := &session{pgidDecided: make(chan struct{})}
		var buf bytes.Buffer
		s.readers.Add(1)
		s.copy(&buf, &chunkReader{stream, int(chunk) + 1}, true, 0)
		want := body
		wantReaped := last
		if !last && bytes.HasSuffix(body, []byte(reapedMarker+nonce+"\n")) || !last && bytes.HasSuffix(body, []byte(reapedMarker+nonce+"\r\n")) {
			// The command's output ended with the line itself: it cannot
			// be told from the supervisor's (it knows no nonce: see
			// supervisor), and is taken for it.
			want, wantReaped = body[:bytes.LastIndex(body, []byte(reapedMarker))], true
		}
		if !bytes.Equal(buf.Bytes(), want) || s.reaped.Load() != wantReaped {
			t.Fatalf("got %q, reaped %v; want %q, reaped %v", buf.Bytes(), s.reaped.Load(), want, wantReaped)
		}
		if w := s.info(); w.pgid != 42 || !w.sub || w.nonce != nonce || w.start != "7" {
			t.Fatalf("wrapper: got %+v", w)
		}
	})
}
