//go:build unix

package main

import (
	"os"
	"syscall"
)

// inode tells a file renamed over the old one from the old one, even with
// the same size and modification time.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
