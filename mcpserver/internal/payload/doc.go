// Package payload generates the deterministic test payloads that the
// test-only emit tool sends and the transport tests expect back byte for
// byte: plain ASCII, JSON quoting, multibyte text, long unbroken runs and
// control characters.
package payload
