//go:build unix && !linux

package mcpserver

import "os"

// widenPipe does nothing: only Linux lets a process size a pipe.
func widenPipe(*os.File) {}
