package redact

import (
	"bytes"
	"slices"
	"testing"
)

// referenceNewlines is newlines written out: every index of '\n'.
func referenceNewlines(p []byte) []int32 {
	var out []int32
	for i, c := range p {
		if c == '\n' {
			out = append(out, int32(i))
		}
	}
	return out
}

// allNewlines calls newlines until p is searched, with out of the given
// size.
func allNewlines(p []byte, size int) []int32 {
	var got []int32
	out := make([]int32, size)
	for off := 0; off < len(p); {
		n, done := newlines(p[off:], out)
		if n == 0 && done == 0 {
			panic("newlines made no progress")
		}
		for _, i := range out[:n] {
			got = append(got, int32(off)+i)
		}
		off += done
	}
	return got
}

// FuzzNewlines checks newlines (SSE2 on amd64) against referenceNewlines
// for any input and any room in out, down to one index.
func FuzzNewlines(f *testing.F) {
	f.Add([]byte("a\nb\n\n"), uint8(1))
	f.Add(bytes.Repeat([]byte("0123456789abcdef\n"), 40), uint8(32))
	f.Add(bytes.Repeat([]byte("\n"), 100), uint8(33))
	f.Fuzz(func(t *testing.T, p []byte, size uint8) {
		got := allNewlines(p, 1+int(size))
		if want := referenceNewlines(p); !slices.Equal(got, want) {
			t.Fatalf("newlines(%q) with room for %d = %v; want %v", p, 1+int(size), got, want)
		}
	})
}
