// Package httpact performs one HTTP request against a configured endpoint on
// behalf of an agent, without ever letting the agent choose where the request
// goes or see the credential it carries.
//
// The agent supplies a method, a path, a query, headers and a body. The path
// is confined under the endpoint's base URL (no scheme, host, port or
// userinfo can be supplied, and no dot segment, plain or encoded, escapes the
// base path); agent headers cannot set Authorization, Cookie, Host, Proxy-*
// or the header the endpoint injects. The credential is added to each
// request, never by a shared RoundTripper, and redirects are not followed
// unless the endpoint allows same-origin hops.
//
// The connection dials the very address that was checked against the denied
// ranges (loopback, private, link-local, unspecified, ...), so a second DNS
// answer cannot redirect it. Retries use github.com/hashicorp/go-retryablehttp
// with its logger off, only for idempotent requests, and return the last
// response rather than a "giving up" error. The response body is copied into
// an io.Writer up to a byte budget; past it the request is abandoned and the
// result says so.
//
// Errors and logs never contain a header value, a query string or userinfo.
package httpact
