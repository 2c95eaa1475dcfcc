// Package config reads actiongw's TOML configuration strictly (an unknown
// key is an error naming its line) and is the one home of every default:
// each is stated once, in the `default` tag of its field.
//
// config.go holds the sections ([server], [audit], [approval]) and the
// defaults; targets.go the targets ([ssh.*], [group.*], [http.*]) and the
// keyring items they name; load.go decoding, and errors with their key
// and line; validate.go, validate_ssh.go and validate_http.go the checks,
// a function per section; sshconfig.go and sshimport.go what is read from
// ~/.ssh/config; cert.go certificate files.
package config
