//go:build !linux

package output

import "testing"

// diskUsage is measured on Linux only.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	t.Skip("disk use is measured with Linux's st_blocks")
	return 0
}
