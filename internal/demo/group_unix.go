//go:build unix

package demo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// GroupAlive reports whether process group pgid has a process that is not
// a zombie: how the demo confirms that a cancelled command is gone. Where
// /proc is missing, a zombie counts as alive.
func GroupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …", where comm may hold spaces and ')'.
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 3 && fields[0] != "Z" && fields[2] == want {
			return true
		}
	}
	return false
}
