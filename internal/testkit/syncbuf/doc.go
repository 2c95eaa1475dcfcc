// Package syncbuf is a byte buffer safe for concurrent writers and readers,
// for collecting a child process's output or logs in tests and harnesses.
package syncbuf
