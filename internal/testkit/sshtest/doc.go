// Package sshtest starts a real OpenSSH sshd on a loopback port for
// integration tests, with generated host and client keys.
//
// Who sshd logs clients in as depends on who runs the tests:
//
//   - not root: sshd runs as the current user and logs in only that user
//     (it cannot switch users), so no account is created or changed.
//   - root: sshd runs as root with privilege separation and logs in User,
//     an unprivileged account; under CI (testenv.CI) Start creates it with
//     useradd when it does not exist. As root outside CI, without that
//     account, it logs in root, for which OpenSSH refuses "signal"
//     requests (see Server.Signals).
//
// With Options.User, sshd logs in that account in place of User, created
// the same way. With Options.Shell, sshd logs in an account whose login shell is that
// shell (ShellUser), created the same way; it needs root.
//
// Without sshd, or on a system that is not Unix, Start ends the test with
// testenv.Missing: skipped on a newcomer's machine, failed under CI.
package sshtest
