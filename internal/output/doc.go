// Package output keeps what actions print: a Capture is the io.Writer a
// producer copies one remote stream into (redacted, counted, hashed,
// previewed and spooled, never blocking and never failing); the Spool keeps
// the retained bytes on disk under unguessable handles for paging and
// search, within a disk cap, in a directory several processes may share;
// reads and searches are bounded in number, memory and time; and the
// result builders fit a tool result into the content limit by shrinking
// previews, never by cutting JSON.
package output
