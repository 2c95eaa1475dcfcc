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
// from where they could begin a pattern by its head, for as long as the
// secret's length says; Close decides them as the end of the input, and
// Cut, for a stream that stopped early, replaces them with a marker
// instead of emitting them. A head is a form's first 3 bytes, after its
// public prefix: the bytes the same for every value of its kind (a
// provider's token prefix such as "ghp_" or "xoxb-", a PEM begin line,
// the "openssh-key-v1" or DER header a key's body begins with, in each
// encoding), none for an ordinary secret. So output with bytes every
// secret of a kind begins with ("---", "623", hex of a key body's "b3B",
// "676", hex of "ghp") is held only while it could still go on to a head,
// not for the secret's length. Where the bytes after a head change how
// its bytes are written (a UTF-8 sequence it begins, a line break in it),
// bytes that begin that form of any secret that shares them are held.
// What an agent sees of its output depends on a secret only
// through its public prefix and 3 bytes more, its length, and whether the
// output holds it whole: the redactor is no oracle that a guess, a byte at
// a time, could question.
package redact
