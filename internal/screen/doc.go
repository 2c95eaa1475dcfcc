// Package screen is what a person would see of a terminal session: a
// terminal emulator (github.com/charmbracelet/x/vt: cursor movement,
// erase, scroll regions, the alternate screen) fed a session's output
// and rendered as rows of plain text with the cursor, colours dropped;
// the named keys a session can be sent; and Guard, which redacts a
// secret the remote end echoes back with terminal codes between its
// characters, which a byte redactor cannot see.
//
// The emulator is slow (a few MB/s), so a Screen renders only when it is
// looked at, from a bounded backlog: a flood never slows the drain of
// the session, and when the backlog overflows, the screen is reset and
// rendered from the latest output alone.
package screen
