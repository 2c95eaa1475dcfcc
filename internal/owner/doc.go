// Package owner names the running process, so that state several actiongw
// processes share (the spool, the audit log) can record whose it is and
// later tell whether that process still runs.
package owner
