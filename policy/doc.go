// Package policy decides whether an action on a target is allowed, asked
// or denied, and with which budget. It is pure: no I/O, no clocks, no
// globals, so every decision can be tested from a table.
//
// A call is decided once, into a Decision (SSH.Decide for a command,
// SSH.DecideTransfer for a file transfer, HTTP.Decide for a request,
// Fanout for a command on many targets): the verdict and the rule behind
// it, the timeout and whether the call's ask was capped, the caps, and for
// a command its sudo, stdin, directory and environment. A denial is a
// *DeniedError (the target's rules forbid it), a refusal for a bound a
// *LimitError (a size, a NUL byte, a variable name).
//
// SSH commands are checked against RE2 patterns: an allow pattern must match
// the whole command, a deny pattern matches anywhere in it, deny wins, and a
// target with an allow list denies whatever the list does not match. HTTP
// requests are checked against the endpoint's methods and path patterns.
// File transfer paths are checked against allow and deny globs (Paths) on
// the path as the server resolved it, and the directory a command runs in
// against the same globs (Dirs) on the path as cleaned.
package policy
