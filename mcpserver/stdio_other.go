//go:build !unix

package mcpserver

import "os"

// TakeStdout returns os.Stdout: descriptor redirection is unix-only.
func TakeStdout() (*os.File, error) { return os.Stdout, nil }

// TakeStdin returns os.Stdin: descriptor redirection is unix-only.
func TakeStdin() (*os.File, error) { return os.Stdin, nil }
