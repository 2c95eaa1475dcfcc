// Package secrets keeps actiongw's credentials in the operating system's
// keyring and hands them out as values that never print.
//
// Items live in the Secret Service (gnome-keyring, KeePassXC, …) on Linux,
// the Keychain on macOS and the Credential Manager on Windows, through
// github.com/zalando/go-keyring, under the service name "actiongw" and the
// item's name as user name. On Linux an item is therefore readable with
//
//	secret-tool lookup service actiongw username NAME
//
// and values are stored byte for byte (the Secret Service carries bytes), so a
// PEM key keeps its newlines.
//
// A [Value] formats, logs and marshals as "[secret]"; only [Value.Reveal]
// returns the bytes, at the place where a credential is injected.
//
// When no Secret Service answers, calls fail fast with an error matching
// [ErrNoService]; there is no fallback to a file or an environment variable.
package secrets
