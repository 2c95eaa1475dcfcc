// Package gateway runs actions for an agent. Every kind of action (an SSH
// command, an HTTP request) goes through one pipeline: policy, secrets, the
// concurrency limits, the audit intent, execution into bounded captures,
// the status, the audit outcome, and a result that fits the content limit.
//
// The captures it hands to sshexec and httpact never block and never fail,
// so those packages copy remote bytes to the end while the gateway decides
// what is kept.
package gateway
