// Package redact replaces every known form of every secret with a marker
// naming the secret, in one string or in a stream split across any number
// of writes.
//
// Forms says what is known of a value: the value raw and encoded (JSON,
// URL, hex, base64 at every alignment), and, for a value of several lines
// such as a private key, each line, and the whole with LF and CRLF line
// ends. A Stream holds back only the last bytes, from where their first
// bytes could begin a pattern; Close decides them as the end of the input,
// and Cut, for a stream that stopped early, replaces them with a marker
// instead of emitting them. What is held never depends on how far bytes
// match a secret past their first 3, so that it is no oracle.
package redact
