package tour

import (
	"fmt"
	"strings"
	"testing"
)

// The demo checks pages of `seq 1 7000000` against seqOffset and seqText:
// they must agree with the real text.
func TestSeqText(t *testing.T) {
	var b strings.Builder
	const n = 1_200_000
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	text := b.String()
	for _, num := range []int64{1, 2, 9, 10, 11, 99, 100, 999_999, 1_000_000, n} {
		off := seqOffset(num)
		if got, want := text[off:off+int64(len(fmt.Sprint(num)))], fmt.Sprint(num); got != want {
			t.Errorf("seqOffset(%d) = %d: the text there is %q; want %q", num, off, got, want)
		}
	}
	if got, want := seqOffset(n+1), int64(len(text)); got != want {
		t.Errorf("seqOffset(%d) = %d; want the length %d", n+1, got, want)
	}
	for _, off := range []int64{0, 1, 17, 18, 19, 188, 189, 12345, 6_888_888, int64(len(text)) - 100} {
		for _, size := range []int64{1, 7, 48} {
			if got, want := seqText(off, size), text[off:off+size]; got != want {
				t.Errorf("seqText(%d, %d) = %q; want %q", off, size, got, want)
			}
		}
	}
}
