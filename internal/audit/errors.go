package audit

import (
	"errors"
	"fmt"
)

// ErrDiskFull matches (with errors.Is) a *WriteError caused by a full
// file system or a spent quota, on every system. Nothing of the records
// stayed in the log unless the error is Stopped: free space and append
// again.
var ErrDiskFull = errors.New("no space left on the device")

// ErrNoKey is returned (wrapped) by OpenWith and Seal for a keyed log when
// no key is given: records appended without it would break the chain.
var ErrNoKey = errors.New("the audit log is keyed and no key was given")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit log: closed")

// WriteError reports records that could not be written.
type WriteError struct {
	// Op is what failed: "write", "sync", "head", "rotate", "read the
	// log's end".
	Op string
	// Stopped is true when this Log appends no more records: what reached
	// the disk is unknown (a failed fsync), a failed write could not be
	// undone, or the log was changed under it. Otherwise nothing of the
	// records stayed in the log and a later Append may succeed.
	Stopped bool
	Err     error
}

func (e *WriteError) Error() string {
	if e.Stopped {
		return fmt.Sprintf("audit log: %s failed: %v; this process appends no more records (restart it to check the log and go on)", e.Op, e.Err)
	}
	return fmt.Sprintf("audit log: %s failed, nothing of the records was kept: %v", e.Op, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDiskFull) true for a full disk.
func (e *WriteError) Is(target error) bool { return target == ErrDiskFull && isDiskFull(e.Err) }
