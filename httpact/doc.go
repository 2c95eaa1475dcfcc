// Package httpact performs one HTTP request against a configured endpoint on
// behalf of an agent, without ever letting the agent choose where the request
// goes or see the credential it carries.
//
// The agent supplies a method, a path, a query, headers and a body.
// Endpoint.Check decides on them before anything is sent, and Client.Do runs
// the very same checks: the path is confined under the endpoint's base URL
// (no scheme, host, port or userinfo can be supplied, and no dot segment,
// plain or encoded, escapes the base path) and the endpoint's policy is
// asked about the normalized path; agent headers cannot set Authorization,
// Cookie, Host, Proxy-*, framing headers or the header the endpoint injects,
// nor, unless the endpoint allows them, the special headers that make a
// server change the form of the body (Accept-Encoding, Range, ...), so that
// a credential in it escapes redaction, or the method or path it acts on
// (X-HTTP-Method-Override, ...); the URL and the headers are kept within
// the endpoint's sizes. The credential is added to each request, never by a
// shared RoundTripper, and redirects are not followed unless the endpoint
// allows same-origin hops, which carry no Referer.
//
// The transport asks for gzip itself and decodes it, so the caller sees the
// body as plain bytes; a body still in a content coding nobody asked for is
// not read.
//
// The connection dials the very address that was checked against the denied
// ranges (loopback, private, link-local, unspecified, ...), so a second DNS
// answer cannot redirect it. Retries use github.com/hashicorp/go-retryablehttp
// with its logger off, only for idempotent requests, and return the last
// response rather than a "giving up" error. The response body is copied into
// an io.Writer up to a byte budget; past it the request is abandoned and the
// result says so.
//
// An endpoint may go through an HTTP proxy, its own (Endpoint.Proxy) or the
// environment's (Endpoint.ProxyFromEnvironment), never one the agent names.
// An https request crosses it inside a CONNECT tunnel, so the proxy sees
// only the host and port; a plain http request with a credential is
// refused. The proxy's address is dialled through the guard with private
// addresses allowed; the proxy resolves the endpoint's host, so only a
// literal address or a localhost name in it is checked against the denied
// ranges.
//
// An endpoint behind a bastion goes through Endpoint.Via instead: its
// connections are opened by the far side (an SSH target's server), which
// resolves the host name; https runs TLS over it end to end; only the
// base URL's and the token URL's host and port are ever dialled, and a
// literal link-local or metadata address is refused as behind a proxy.
//
// The OAuth2 auth kinds fetch an access token (golang.org/x/oauth2) through
// the endpoint's own guarded transport and proxy, cache it per endpoint
// until shortly before its expiry, hand every token to the caller's
// OAuth2.OnToken before it is sent (so that its redactor knows it), and on
// a 401 fetch one new token and retry once, a few times at once and then
// once per 15 s per endpoint, so that an agent cannot make the redactor
// learn a token per call.
//
// Errors and logs never contain a header value, a query string or userinfo.
package httpact
