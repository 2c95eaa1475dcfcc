// Package config reads actiongw's TOML configuration strictly (an unknown
// key is an error naming its line) and is the one home of every default:
// each is stated once, in the `default` tag of its field.
package config
