//go:build unix

package mcpserver

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TakeStdout returns the real standard output for the transport and points
// file descriptor 1 at stderr, so a stray print (from any package) lands in
// the log instead of corrupting the protocol stream. A pipe or socket is
// switched to non-blocking mode so Serve can interrupt a stuck write.
func TakeStdout() (*os.File, error) {
	f, err := takeFD(1, 2, "stdout")
	if err != nil {
		return nil, fmt.Errorf("taking stdout: %w", err)
	}
	return f, nil
}

// TakeStdin returns standard input for the transport and points file
// descriptor 0 at /dev/null, so nothing else can consume protocol bytes. A
// pipe or socket is switched to non-blocking mode so Serve can interrupt a
// blocked read when its context ends; a pipe is widened where the system
// allows (widenPipe).
func TakeStdin() (*os.File, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("taking stdin: %w", err)
	}
	defer null.Close()
	f, err := takeFD(0, int(null.Fd()), "stdin")
	if err != nil {
		return nil, fmt.Errorf("taking stdin: %w", err)
	}
	widenPipe(f)
	return f, nil
}

// takeFD duplicates fd for the caller and points fd at replacement.
func takeFD(fd, replacement int, name string) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("dup: %w", err)
	}
	if err := unix.Dup2(replacement, fd); err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("dup2: %w", err)
	}
	var st unix.Stat_t
	if unix.Fstat(dup, &st) == nil {
		if mode := st.Mode & unix.S_IFMT; mode == unix.S_IFIFO || mode == unix.S_IFSOCK {
			// os.NewFile puts a non-blocking descriptor in the poller, which
			// gives the file working deadlines.
			_ = unix.SetNonblock(dup, true)
		}
	}
	return os.NewFile(uintptr(dup), name), nil
}
