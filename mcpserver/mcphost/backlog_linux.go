package mcphost

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// StdoutBacklog reports how many bytes the server has written to its stdout
// pipe that this client has not read yet (TIOCINQ is FIONREAD on Linux), and
// the pipe's capacity. A writer blocks once less than a page is free, not
// only when the two are equal: a pipe buffer fills page by page, so after
// several writes it can be "full" with a partly used last page.
func (c *Client) StdoutBacklog() (unread, capacity int, err error) {
	sc, ok := c.stdout.(syscall.Conn)
	if !ok {
		return 0, 0, errors.New("mcphost: server stdout is not a pipe")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("mcphost: %w", err)
	}
	var opErr error
	err = raw.Control(func(fd uintptr) {
		if unread, opErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ); opErr != nil {
			return
		}
		capacity, opErr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("mcphost: reading pipe backlog: %w", err)
	}
	return unread, capacity, nil
}
