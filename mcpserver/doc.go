// Package mcpserver serves actiongw's tools over MCP on stdio: the official
// Go SDK handles the protocol, and the project's own connection keeps the
// stdin reader, the single stdout writer and the tool handlers independent,
// so a host that stops reading never stops cancellation or new requests.
package mcpserver
