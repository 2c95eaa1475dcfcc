//go:build linux

package output

import (
	"errors"
	"syscall"
)

// blockSize is the allocation unit of the filesystem that holds dir: every
// file and directory takes at least one.
func blockSize(dir string) int64 {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil || fs.Bsize <= 0 {
		return defaultBlockSize
	}
	return fs.Bsize
}

// isNoSpace reports whether err is a full filesystem or an exhausted quota,
// which evicting finished actions can cure.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
