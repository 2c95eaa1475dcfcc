// Package mcphost is the host side of an MCP stdio session: it starts a
// server process and talks to it over its pipes, and its reader never stops
// draining the server's stdout, so the server is never left blocked in a
// write. The demo and the transport tests use it.
package mcphost
