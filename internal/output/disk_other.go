//go:build !linux

package output

import (
	"errors"
	"syscall"
)

func blockSize(string) int64 { return defaultBlockSize }

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
