package screen

import (
	"bytes"
	"testing"
)

// BenchmarkRender is the emulator's speed on scrolling lines: what a
// session drains at without a reset of its screen.
func BenchmarkRender(b *testing.B) {
	s := New(80, 24)
	defer s.Close()
	buf := bytes.Repeat(append(bytes.Repeat([]byte("0123456789abcdef"), 4), '\r', '\n'), 1000)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		s.Write(buf)
		s.Snapshot()
	}
}
