// Package redact replaces every known form of every secret with a marker
// naming the secret, in one string or in a stream split across any number
// of writes.
package redact
