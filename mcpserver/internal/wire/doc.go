// Package wire splits a newline-delimited JSON-RPC byte stream into frames
// under a hard byte limit, before any JSON is parsed, decodes a frame's
// message (Decode, the SDK's decoding with less garbage), and counts what
// crosses the stdio pipes; both the server transport and the host client
// use it.
package wire
