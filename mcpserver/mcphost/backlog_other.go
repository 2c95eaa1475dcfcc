//go:build !linux

package mcphost

import (
	"errors"
	"fmt"
)

// StdoutBacklog is Linux-only: it reads the pipe's backlog and capacity
// with TIOCINQ and F_GETPIPE_SZ. Here it returns an error that
// errors.Is(err, errors.ErrUnsupported).
func (c *Client) StdoutBacklog() (unread, capacity int, err error) {
	return 0, 0, fmt.Errorf("mcphost: reading the stdout pipe's backlog: %w on this system", errors.ErrUnsupported)
}
