package httpact

import "fmt"

// RequestError reports a request refused before anything was sent: a path
// that escapes the base, a forbidden header, a control character, a method
// or path the endpoint does not allow. Its message never contains a header
// or query value.
type RequestError struct {
	Field  string // method, path, query, url (path and query), headers or body
	Reason string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Reason }

// EndpointError reports an invalid endpoint field. It never holds a secret
// value.
type EndpointError struct {
	Endpoint string
	Field    string // the config key: base_url, methods, paths, auth, ...
	Reason   string
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("endpoint %q: %s: %s", e.Endpoint, e.Field, e.Reason)
}
