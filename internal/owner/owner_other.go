//go:build !linux

package owner

// startTime is not known here: an ID is the pid alone.
func startTime(int) string { return "" }

func exists(pid int) bool { return processExists(pid) }
