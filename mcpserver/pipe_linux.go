package mcpserver

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdinPipeSize is the capacity widenPipe asks for: 1 MiB, the most an
// unprivileged process may set by default (fs.pipe-max-size).
const stdinPipeSize = 1 << 20

// widenPipe asks for a pipe of stdinPipeSize behind f. At Linux's default
// of 64 KiB, a 7 MB frame (the base64 content of a 5 MiB ssh_upload)
// crossed in over a hundred fills, each a wake-up of the host's writer and
// of serve's reader; on a loaded machine that was several milliseconds of
// an inline upload's time before its handler ran. It is best effort: a
// stream that is not a pipe, or a user over the kernel's quota of pipe
// memory, keeps the pipe as it was, which only costs the wake-ups.
func widenPipe(f *os.File) {
	raw, err := f.SyscallConn() // not Fd, which would make f blocking
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdinPipeSize)
	})
}
