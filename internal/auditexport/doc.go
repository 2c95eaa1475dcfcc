// Package auditexport sends the audit trail to a syslog receiver as it is
// written: each line of the local log becomes one RFC 5424 message, with
// the record's fields as structured data and the line itself, byte for
// byte, as the message, framed by octet counting (RFC 6587) over TCP or
// TLS (RFC 5425).
//
// Sending never delays the action a record belongs to: Send puts the line
// in a bounded queue and returns; a line that does not fit is dropped and
// counted. One goroutine writes the queue to the receiver, and reconnects
// with backoff when the connection breaks. Syslog over TCP has no
// acknowledgement, so after a reconnect the last records written to the
// broken connection are sent again, marked as such; a receiver may see a
// record twice, and dedupes by its message (or its seq and prev). Close
// writes what is queued, then closes the connection's writing side and
// waits, as long as its context allows, for the receiver to close its
// own, which a receiver does once it has read everything: the only sign
// that the last records arrived; those not confirmed are counted lost.
// The local log stays the durable record: what an export cannot deliver
// is counted, never waited for.
package auditexport
