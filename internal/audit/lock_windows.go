package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes a LockFileEx lock on the first byte of f, exclusive or
// shared, waiting for it.
func lockFile(f *os.File, exclusive bool) error {
	var flags uint32
	if exclusive {
		flags = windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
}

func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}

func isDiskFull(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}

// syncDir does nothing: Windows has no directory fsync, and NTFS journals
// renames.
func syncDir(string) error { return nil }
