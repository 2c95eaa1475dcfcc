// Package gateway runs one action end to end — policy, secrets, execution,
// bounded capture, redaction, spool and audit — and holds the configuration
// that names the targets an agent may use.
//
// The capture writers it hands to sshexec and httpact never block and never
// fail, so those packages copy remote bytes to the end while the gateway
// decides what is kept.
package gateway
