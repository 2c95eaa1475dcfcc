// Package policy decides whether an action on a target is allowed and with
// which budget. It is pure: no I/O, no clocks, no globals, so every decision
// can be tested from a table.
//
// SSH commands are checked against RE2 patterns: an allow pattern must match
// the whole command, a deny pattern matches anywhere in it, deny wins, and a
// target with an allow list denies whatever the list does not match. HTTP
// requests are checked against the endpoint's methods and path patterns.
// File transfer paths are checked against allow and deny globs (Paths) on
// the path as the server resolved it, and the directory a command runs in
// against the same globs (Dirs) on the path as cleaned.
package policy
