// Command actiongw is a local MCP server that runs SSH commands and HTTP
// calls for an AI agent with credentials that stay in the OS keyring.
//
// Usage:
//
//	actiongw demo                     try it: a built-in sandbox driven over MCP
//	actiongw serve [-config PATH]     serve MCP on stdin/stdout
//	actiongw serve -demo              serve the built-in sandbox to any MCP client
//	actiongw secret set|delete NAME   store or remove a secret in the OS keyring
//	actiongw secret list [-config P]  names the config references, present or not
//	actiongw check [-config PATH]     validate config, secrets and targets
//	actiongw audit verify|tail|seal   check, print, or seal a damaged audit log
package main
