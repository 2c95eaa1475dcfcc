// Package wire splits a newline-delimited JSON-RPC byte stream into frames
// under a hard byte limit, before any JSON is parsed, and counts what crosses
// the stdio pipes; both the server transport and the host client use it.
package wire
