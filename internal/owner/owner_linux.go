package owner

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// startTime is field 22 of /proc/PID/stat: when the process started, in
// clock ticks after boot; "" when it cannot be read.
func startTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name, field 2, may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(data[i+1:])) // from field 3, the state
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
