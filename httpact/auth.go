package httpact

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Auth kinds: the names of the rows of the table AuthKinds returns.
const (
	AuthNone   = "none"
	AuthBearer = "bearer"
	AuthBasic  = "basic"
	AuthHeader = "header"
	AuthQuery  = "query"
	// The OAuth2 kinds send "Authorization: Bearer" with an access token
	// from Auth.OAuth2's token endpoint.
	AuthOAuth2ClientCredentials = "oauth2_client_credentials"
	AuthOAuth2RefreshToken      = "oauth2_refresh_token"
)

// Auth is the credential injected into each request. Secret values come
// from the keyring; String and GoString never print them.
type Auth struct {
	// Kind names a row of AuthKinds, or is "" for AuthNone: AuthBearer
	// (Token), AuthBasic (User and Password), AuthHeader (Token in the
	// header named Header), AuthQuery (Token in the query parameter named
	// Param), or one of the OAuth2 kinds (OAuth2).
	Kind     string
	Token    []byte
	User     []byte
	Password []byte
	Header   string
	Param    string
	// OAuth2 is set for the OAuth2 kinds only.
	OAuth2 *OAuth2
}

func (a Auth) String() string   { return "httpact.Auth{Kind:" + strconv.Quote(a.Kind) + "}" }
func (a Auth) GoString() string { return a.String() }

// An AuthKind is one way of sending an endpoint's credential: one row of
// the table AuthKinds returns. Everything that differs between kinds is
// in its row, and read from there: the config keys it needs
// (internal/config's validation), the checks of its settings
// (Endpoint.Validate) and of its secret values (Do), where and how the
// credential goes into a request (Do, and the agent's headers and query,
// which may not touch that place), and the forms of its secrets other
// than their values that a request carries, which the redactor must know
// (the gateway). A new kind is one row; the gateway's TestAuthKindsEcho
// sends every row's credential to a server that echoes it and fails
// unless what comes back is redacted in every form.
type AuthKind struct {
	// Name is the value of auth in the config, and of Auth.Kind.
	Name string
	// Needs are the config keys the kind requires, Optional those it may
	// also use; config validation refuses any other auth key that is set.
	Needs, Optional []string
	// OAuth2 marks the kinds that send an access token fetched from a
	// token endpoint (Auth.OAuth2), not a value from the keyring.
	OAuth2 bool

	// check checks the kind's settings in e.Auth, not the secret values,
	// which may not be loaded yet; it returns an *EndpointError. Nil:
	// nothing to check.
	check func(e *Endpoint) error
	// checkSecrets checks the values Do is about to send and says what
	// is wrong with them, "" when nothing is. Nil: nothing to check.
	checkSecrets func(a *Auth) string
	// header or param names where the credential goes, a request header
	// or a query parameter; the agent may set neither. The OAuth2 kinds
	// use a header: the URL is built before their token is fetched. Both
	// nil for a kind that sends nothing.
	header, param func(a *Auth) string
	// value is what goes there; access is the access token of an OAuth2
	// kind, which Do fetched.
	value func(a *Auth, access []byte) string
	// derived returns what a request carries that holds a secret but is
	// neither its value nor an encoding of the value alone; nil: nothing.
	derived func(a *Auth) []DerivedForm
}

// A DerivedForm is what a request carries that holds a secret and more,
// so that the redactor, which knows each secret's value and its
// encodings, must know it too: Basic auth sends base64("user:password"),
// whose characters at the edges of the password hold bits of both. An
// echoing server would hand those back past a redactor that knew the
// password alone.
type DerivedForm struct {
	// Key is the config key of the secret it holds ("password_secret"),
	// whose keyring item it is redacted under.
	Key   string
	Value []byte
}

// authKinds is the table, in the order errors list the names.
var authKinds = []AuthKind{
	{Name: AuthNone},
	{
		Name: AuthBearer, Needs: []string{"token_secret"},
		checkSecrets: tokenLoaded,
		header:       authorization,
		value:        func(a *Auth, _ []byte) string { return "Bearer " + string(a.Token) },
	},
	{
		Name: AuthBasic, Needs: []string{"user", "password_secret"},
		checkSecrets: basicLoaded,
		header:       authorization,
		value: func(a *Auth, _ []byte) string {
			cred := basicCredential(a)
			defer clear(cred)
			return "Basic " + base64.StdEncoding.EncodeToString(cred)
		},
		derived: func(a *Auth) []DerivedForm {
			return []DerivedForm{{Key: "password_secret", Value: basicCredential(a)}}
		},
	},
	{
		Name: AuthHeader, Needs: []string{"header", "token_secret"},
		check: func(e *Endpoint) error {
			if !validToken(e.Auth.Header) {
				return e.invalid("auth", "kind header needs a valid header name")
			}
			if agentForbidden(e.Auth.Header) {
				return e.invalid("auth", "header %q cannot carry a credential", e.Auth.Header)
			}
			return nil
		},
		checkSecrets: tokenLoaded,
		header:       func(a *Auth) string { return a.Header },
		value:        func(a *Auth, _ []byte) string { return string(a.Token) },
	},
	{
		Name: AuthQuery, Needs: []string{"param", "token_secret"},
		check: func(e *Endpoint) error {
			if e.Auth.Param == "" || strings.ContainsFunc(e.Auth.Param, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
				return e.invalid("auth", "kind query needs a parameter name")
			}
			return nil
		},
		checkSecrets: tokenLoaded,
		param:        func(a *Auth) string { return a.Param },
		value:        func(a *Auth, _ []byte) string { return string(a.Token) },
	},
	// What reaches the API of the OAuth2 kinds is the access token, which
	// OAuth2.OnToken hands to the redactor whole before it is sent. The
	// client secret and the refresh token go only to the token endpoint,
	// whose answer never reaches the agent; but the token request's
	// Basic header, base64 of the client id and secret, could be kept
	// where the agent reads (a proxy's log on an SSH target), so it is a
	// derived form (oauth2Derived).
	{
		Name: AuthOAuth2ClientCredentials, Needs: []string{"token_url", "client_id", "client_secret_secret"},
		Optional: []string{"scopes"}, OAuth2: true,
		check: checkOAuth2,
		checkSecrets: func(a *Auth) string {
			o := a.OAuth2
			switch {
			case o.OnToken == nil:
				// A token nobody was told of could come back unredacted.
				return "no redactor is told of the access tokens"
			case len(o.ClientSecret) == 0:
				return "the client secret is empty or not loaded"
			}
			return oauth2Controls(o)
		},
		header:  authorization,
		value:   bearerAccess,
		derived: oauth2Derived,
	},
	{
		Name: AuthOAuth2RefreshToken, Needs: []string{"token_url", "client_id", "refresh_token_secret"},
		Optional: []string{"client_secret_secret"}, OAuth2: true,
		check: checkOAuth2,
		checkSecrets: func(a *Auth) string {
			o := a.OAuth2
			switch {
			case o.OnToken == nil, o.OnRefreshToken == nil:
				return "no redactor is told of the access tokens"
			case len(o.RefreshToken) == 0:
				return "the refresh token secret is empty or not loaded"
			}
			return oauth2Controls(o)
		},
		header:  authorization,
		value:   bearerAccess,
		derived: oauth2Derived,
	},
}

func authorization(*Auth) string { return "Authorization" }

func bearerAccess(_ *Auth, access []byte) string { return "Bearer " + string(access) }

func tokenLoaded(a *Auth) string {
	if len(a.Token) == 0 {
		return "the token secret is empty or not loaded"
	}
	if hasControl(a.Token) {
		return "the token secret contains a control character"
	}
	return ""
}

func basicLoaded(a *Auth) string {
	switch {
	case len(a.User) == 0:
		return "the basic-auth user is empty"
	case hasControl(a.User) || hasControl(a.Password):
		return "the basic-auth user or password contains a control character"
	case strings.IndexByte(string(a.User), ':') >= 0:
		return "the basic-auth user contains ':'"
	}
	return ""
}

// basicCredential is "user:password", in a new slice the caller may clear.
func basicCredential(a *Auth) []byte {
	cred := make([]byte, 0, len(a.User)+1+len(a.Password))
	return append(append(append(cred, a.User...), ':'), a.Password...)
}

// oauth2Derived is the client credential of a token request as
// golang.org/x/oauth2 sends it in a Basic header (its AuthStyleInHeader,
// which it tries first): the client id and secret, each URL-encoded,
// joined by ":". Without a client secret there is none.
func oauth2Derived(a *Auth) []DerivedForm {
	o := a.OAuth2
	if o == nil || len(o.ClientSecret) == 0 {
		return nil
	}
	cred := url.QueryEscape(o.ClientID) + ":" + url.QueryEscape(string(o.ClientSecret))
	return []DerivedForm{{Key: "client_secret_secret", Value: []byte(cred)}}
}

func checkOAuth2(e *Endpoint) error {
	o := e.Auth.OAuth2
	if o == nil {
		return e.invalid("auth", "kind %s needs its OAuth2 settings", e.Auth.Kind)
	}
	if err := CheckTokenURL(o.TokenURL, e.AllowPrivate || o.Via != nil); err != nil {
		return e.invalid("token_url", "%s", err)
	}
	if o.ClientID == "" || hasControl(o.ClientID) {
		return e.invalid("client_id", "must be set, without control characters")
	}
	for _, s := range o.Scopes {
		if !validScope(s) {
			return e.invalid("scopes", "%q is not a scope (printable, no space, quote or backslash)", s)
		}
	}
	return nil
}

func oauth2Controls(o *OAuth2) string {
	if hasControl(o.ClientSecret) || hasControl(o.RefreshToken) {
		return "the client secret or refresh token contains a control character"
	}
	return ""
}

// AuthKinds returns the table of auth kinds, in the order errors list
// their names.
func AuthKinds() []AuthKind {
	kinds := make([]AuthKind, len(authKinds))
	for i, k := range authKinds {
		kinds[i] = k.clone()
	}
	return kinds
}

// LookupAuthKind returns the row of AuthKinds named name.
func LookupAuthKind(name string) (AuthKind, bool) {
	k := lookupKind(name)
	if k == nil {
		return AuthKind{}, false
	}
	return k.clone(), true
}

// clone copies k's slices, so that a caller cannot change the table.
func (k AuthKind) clone() AuthKind {
	k.Needs, k.Optional = slices.Clone(k.Needs), slices.Clone(k.Optional)
	return k
}

// Derived returns the forms of a's secrets that a request of kind k
// carries besides their values (see DerivedForm), each in a new slice.
func (k AuthKind) Derived(a *Auth) []DerivedForm {
	if k.derived == nil {
		return nil
	}
	return k.derived(a)
}

func lookupKind(name string) *AuthKind {
	for i := range authKinds {
		if authKinds[i].Name == name {
			return &authKinds[i]
		}
	}
	return nil
}

// authKindNames lists the kinds' names, in the table's order.
func authKindNames() []string {
	names := make([]string, len(authKinds))
	for i, k := range authKinds {
		names[i] = k.Name
	}
	return names
}

// kind returns a's row; "" is AuthNone. Nil for an unknown kind, which
// Validate refuses.
func (a *Auth) kind() *AuthKind {
	if a.Kind == "" {
		return lookupKind(AuthNone)
	}
	return lookupKind(a.Kind)
}

// sendsCredential reports whether requests of the kind named name carry
// a credential; an unknown kind is taken to.
func sendsCredential(name string) bool {
	if name == "" {
		return false
	}
	k := lookupKind(name)
	return k == nil || k.value != nil
}

// inject puts a's credential into a checked request's query and header;
// access is the access token of an OAuth2 kind, nil for the others.
func (k *AuthKind) inject(a *Auth, access []byte, q url.Values, h http.Header) {
	switch {
	case k.param != nil:
		q.Set(k.param(a), k.value(a, access))
	case k.header != nil:
		h.Set(k.header(a), k.value(a, access))
	}
}

// setsHeader and setsParam report whether a's credential goes in the
// header or the query parameter named name (in any case): the agent may
// not set it.
func (k *AuthKind) setsHeader(a *Auth, name string) bool {
	return k.header != nil && strings.EqualFold(name, k.header(a))
}

func (k *AuthKind) setsParam(a *Auth, name string) bool {
	return k.param != nil && strings.EqualFold(name, k.param(a))
}

// invalid returns an *EndpointError on field of e.
func (e *Endpoint) invalid(field, format string, args ...any) error {
	return &EndpointError{Endpoint: e.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
}
