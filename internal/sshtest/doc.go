// Package sshtest starts a real OpenSSH sshd on a loopback port for
// integration tests, with generated host and client keys and an unprivileged
// login user.
//
// Tests that use it must run as root (sshd switches to the login user); when
// sshd is missing or the process is not root, Start fails the test under CI
// (CI set) and skips it otherwise.
package sshtest
