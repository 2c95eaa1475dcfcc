// Package console is the person's side of actiongw: a web page on a
// loopback address that shows every serve on a state directory live (its
// actions, their output as the agent gets it, the questions waiting for an
// answer), lets the person answer those questions and stop an action out
// of band, and browses and verifies the audit log.
//
// Nothing the agent controls can reach it: every request needs the
// session a one-time login token opened (the token is printed on the
// person's terminal, never sent over MCP); the Host must be the listen
// address and the Origin, when sent, the console's own; every POST needs
// the session's CSRF token. Responses carry a strict Content-Security-
// Policy, and every asset is embedded in the binary. The page renders
// everything the agent or a remote host controls as text.
//
// The console is a separate process from serve and reads what serves do
// through a Watcher (internal/feed's); a browser tab that stops reading
// is told it missed events, never buffered without bound.
package console
