//go:build unix

package audit

import "syscall"

var diskFullErr error = syscall.ENOSPC
