//go:build !amd64

package redact

import "bytes"

// newlines writes the indexes of the '\n' bytes of p, in order, into out,
// and returns how many it wrote and how many bytes of p it searched: all
// of them, unless out filled up first (then p[done:] is yet to search).
// p must be shorter than 2 GiB.
func newlines(p []byte, out []int32) (n int, done int) {
	for n < len(out) {
		i := bytes.IndexByte(p[done:], '\n')
		if i < 0 {
			return n, len(p)
		}
		out[n] = int32(done + i)
		n++
		done += i + 1
	}
	return n, done
}
