package output

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestAsyncWriter writes chunks of random sizes, smaller and larger than
// its buffers: the destination gets every byte in order once Close
// returns.
func TestAsyncWriter(t *testing.T) {
	for _, tt := range []struct{ buffers, size int }{{1, 1}, {2, 7}, {4, 4096}} {
		rng := rand.New(rand.NewPCG(uint64(tt.buffers), uint64(tt.size)))
		var dst, want bytes.Buffer
		a := NewAsyncWriter(&dst, tt.buffers, tt.size)
		for range 200 {
			p := make([]byte, rng.IntN(3*tt.size+2))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if n, err := a.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write: %d, %v; want %d, nil", n, err, len(p))
			}
			want.Write(p)
		}
		a.Close()
		if !bytes.Equal(dst.Bytes(), want.Bytes()) {
			t.Errorf("buffers %d of %d bytes: the destination got %d bytes, not the %d written in order", tt.buffers, tt.size, dst.Len(), want.Len())
		}
	}
}
