package owner

import "os"

// processExists opens the process: on Windows that fails when there is none.
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
