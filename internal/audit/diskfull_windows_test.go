package audit

import "golang.org/x/sys/windows"

var diskFullErr error = windows.ERROR_DISK_FULL
