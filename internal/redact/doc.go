// Package redact replaces every known form of every secret with a marker
// naming the secret, in one string or in a stream split across any number
// of writes.
//
// Forms says what is known of a value: the value raw and encoded (JSON,
// URL, hex, base64 at every alignment), with and without its trailing
// line ends, with LF and CRLF line ends for a value of several lines, and
// each PEM block in it with its armour and as its bare body. Patterns are
// matched in a view of the input without the line breaks of wrapped
// encodings (join.go), so an encoding is caught at any wrap width.
//
// Only whole forms are replaced. A Stream holds back only the last bytes,
// from where their first 3 bytes could begin a pattern, for as long as
// the secret's length says; Close decides them as the end of the input,
// and Cut, for a stream that stopped early, replaces them with a marker
// instead of emitting them. What an agent sees of its output depends on a
// secret only through its first 3 bytes, its length, and whether the
// output holds it whole: the redactor is no oracle that a guess, a byte at
// a time, could question.
package redact
