package mcpserver

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWidenPipe: the reading end of a pipe gets stdinPipeSize, and the
// file stays non-blocking (its deadlines still work).
func TestWidenPipe(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if limit, _ := strconv.Atoi(strings.TrimSpace(string(b))); limit < stdinPipeSize {
			t.Skipf("fs.pipe-max-size is %d, below %d", limit, stdinPipeSize)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	widenPipe(r)
	raw, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size, flags int
	raw.Control(func(fd uintptr) {
		size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		flags, _ = unix.FcntlInt(fd, unix.F_GETFL, 0)
	})
	if size != stdinPipeSize {
		t.Errorf("got a pipe of %d bytes; want %d", size, stdinPipeSize)
	}
	if flags&unix.O_NONBLOCK == 0 {
		t.Error("got a blocking pipe; want it left non-blocking")
	}
}
