// Package audit keeps the audit trail: an append-only JSON Lines log in
// which every record is chained to the one before it by hash and, with a
// key, carries its own HMAC, with a head file that records the last one,
// so that an edited, removed, inserted, reordered or forged record is
// found by Verify. Any number of processes may append to one log under a
// file lock; the log rotates by size, and the chain runs on through its
// files. A damaged log is refused until Seal moves it aside.
package audit
