package output

import "io"

// AsyncWriter passes what is written to it on to a writer that never fails
// (a hash, a Capture), from a goroutine of its own, so that the producer
// and the writer run on two cores. Bytes are copied into a few buffers of
// equal size that the goroutine writes in order; Write waits only when
// every buffer is queued. Close writes what is buffered, stops the
// goroutine and waits for it. An AsyncWriter is written by one goroutine.
type AsyncWriter struct {
	dst  io.Writer
	buf  []byte // being filled
	work chan []byte
	free chan []byte
	done chan struct{}
}

// NewAsyncWriter starts an AsyncWriter into dst with buffers buffers of
// size bytes each.
func NewAsyncWriter(dst io.Writer, buffers, size int) *AsyncWriter {
	if buffers < 1 || size < 1 {
		panic("output: NewAsyncWriter needs at least one buffer of at least one byte")
	}
	a := &AsyncWriter{dst: dst, buf: make([]byte, 0, size),
		work: make(chan []byte, buffers), free: make(chan []byte, buffers), done: make(chan struct{})}
	for range buffers - 1 {
		a.free <- make([]byte, 0, size)
	}
	go func() {
		defer close(a.done)
		for b := range a.work {
			a.dst.Write(b)
			a.free <- b[:0]
		}
	}()
	return a
}

// Write copies p for the goroutine; it always returns len(p), nil.
func (a *AsyncWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := copy(a.buf[len(a.buf):cap(a.buf)], p)
		a.buf, p = a.buf[:len(a.buf)+k], p[k:]
		if len(a.buf) == cap(a.buf) {
			a.work <- a.buf
			a.buf = <-a.free
		}
	}
	return n, nil
}

// Close writes what is buffered and waits for the goroutine to end. The
// AsyncWriter must not be written after.
func (a *AsyncWriter) Close() {
	if len(a.buf) > 0 {
		a.work <- a.buf
	}
	close(a.work)
	<-a.done
}
