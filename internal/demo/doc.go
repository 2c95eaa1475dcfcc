// Package demo is the sandbox behind `actiongw demo` and `actiongw serve
// -demo`: a loopback SSH server and a loopback HTTP API, run inside the
// serve process, with a gateway configuration and credentials that exist
// only in that process's memory, so that actiongw can be tried on a machine
// with nothing installed or configured.
//
// The SSH server runs each "exec" request as `/bin/sh -c COMMAND`, as the
// user running the process, in a session of its own, and delivers "signal"
// requests to that session's process group, so actiongw's cancellation can
// be seen to reach the remote process. It accepts one client key, generated
// at start, and nothing else. Both servers listen on 127.0.0.1 only: an
// agent using the sandbox can do nothing the person running it cannot.
package demo
