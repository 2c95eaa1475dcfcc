// Package audit keeps the audit trail: an append-only JSON Lines log in
// which every record is chained to the one before it by hash, with a head
// file that records the last one, so that an edited, removed, inserted or
// reordered record is found by Verify.
package audit
