// Package sshexec runs commands on configured SSH targets and writes their
// output into io.Writers it is given, like os/exec does for local commands.
//
// It dials with a context through the whole handshake, always verifies host
// keys (known_hosts or a pinned fingerprint; there is no way to switch that
// off), authenticates with credential bytes its caller took from the keyring
// (or with the user's ssh-agent), reuses one connection per target with a
// bounded number of sessions and a keepalive, and stops a remote command in
// stages when the caller cancels, times out or exceeds an output limit.
//
// Remote commands run under a POSIX login shell (sh, bash, dash, zsh): each
// command is prefixed with a line that reports the process group of the
// remote shell, so that a command can be stopped even when the server
// refuses "signal" requests. A command may run in a given directory, with
// given environment variables, and as root under sudo with the password
// sent on stdin (see Request).
//
// DialTCP opens a TCP connection from a target's server, as ssh -L does
// (a direct-tcpip channel of the pooled connection): what an HTTP endpoint
// behind a bastion goes through.
//
// Files move over SFTP on a session of the same pooled connection
// (Lease.Download, Lease.Upload): paths are resolved on the server and
// checked by the caller before anything is read or written, and an upload
// is written to a temporary name and renamed into place, so the
// destination is never half-written.
package sshexec
