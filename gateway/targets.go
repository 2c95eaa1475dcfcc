package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// SecretStore is what the gateway needs of the keyring: the secrets the
// config names, and a place for its own (the audit log's key).
type SecretStore interface {
	Get(ctx context.Context, name string) (secrets.Value, error)
	Set(ctx context.Context, name string, value []byte) error
}

// sshTarget is a configured SSH target, ready to use.
type sshTarget struct {
	target *sshexec.Target // nil when err is set
	err    error           // why the target cannot be used (a missing secret)
	rules  *policy.SSH
	// sudoPassword (nil: sudo -n) is the keyring item sudoSecret's.
	sudoSecret   string
	sudoPassword []byte
	// inputs are the values of allow_secret_input's items that loaded, and
	// inputErrs why the others did not (see ssh_session.go).
	inputs    map[string][]byte
	inputErrs map[string]error
	// where is user@host:port, as a person asked about a command is shown
	// the target.
	where string
}

// httpEndpoint is a configured HTTP endpoint, ready to use.
type httpEndpoint struct {
	// endpoint checks requests even when err is set (Check needs no
	// credential); only then can it send none.
	endpoint *httpact.Endpoint
	err      error
	rules    *policy.HTTP
	// refreshSecret names the keyring item of an oauth2_refresh_token
	// endpoint's refresh token, where a rotated one is written back.
	refreshSecret string
}

// targets are the configured targets, ready to use: credentials from the
// keyring, compiled rules, or the error that keeps each from being used.
type targets struct {
	ssh  map[string]*sshTarget
	http map[string]*httpEndpoint
}

// loadTargets reads every secret cfg references from store and builds the
// targets, an endpoint's via dialling through pool. It also returns what
// the redactor must know: every loaded value, and the forms each
// endpoint's auth kind derives from its secrets (derivedSecrets); and
// whether a secret did not load.
func loadTargets(ctx context.Context, cfg *config.Config, store SecretStore, pool *sshexec.Pool, log *slog.Logger) (tg *targets, known []redact.Secret, failed bool) {
	values, errs := loadSecrets(ctx, store, cfg.SecretNames())
	for name, err := range errs {
		log.Warn("secret not loaded; targets that use it will fail", "secret", name, "error", err)
	}
	for name, v := range values {
		known = append(known, redact.Secret{Name: name, Value: v.Reveal()})
	}
	for _, e := range cfg.HTTP {
		known = append(known, derivedSecrets(e, values)...)
	}
	tg = &targets{ssh: map[string]*sshTarget{}, http: map[string]*httpEndpoint{}}
	for name := range cfg.SSH {
		tg.ssh[name] = buildSSHTarget(cfg, name, values, errs)
	}
	for name := range cfg.HTTP {
		tg.http[name] = buildHTTPEndpoint(cfg, name, values, errs, tg.via(pool))
	}
	return tg, known, len(errs) > 0
}

func loadSecrets(ctx context.Context, store SecretStore, names []string) (map[string]secrets.Value, map[string]error) {
	values, errs := map[string]secrets.Value{}, map[string]error{}
	var whole error // an error of the keyring as a whole applies to every name
	for _, name := range names {
		if whole != nil {
			errs[name] = whole
			continue
		}
		v, err := store.Get(ctx, name)
		switch {
		case errors.Is(err, secrets.ErrNoService), errors.Is(err, secrets.ErrLocked):
			whole, errs[name] = err, err
		case err != nil:
			errs[name] = err
		case v.Len() < redact.MinSecretLen:
			// Too short to redact: the targets that use it fail, the
			// server does not.
			errs[name] = fmt.Errorf("%w; store a longer value with: actiongw secret set %s", &redact.ShortSecretError{Name: name}, name)
		default:
			values[name] = v
		}
	}
	return values, errs
}

// secretBytes returns the named secret, or the error that kept it from
// loading; "" gives nil.
func secretBytes(name string, values map[string]secrets.Value, errs map[string]error) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	if err := errs[name]; err != nil {
		return nil, err
	}
	return values[name].Reveal(), nil
}

func buildSSHTarget(cfg *config.Config, name string, values map[string]secrets.Value, errs map[string]error) *sshTarget {
	c := cfg.SSH[name]
	st := &sshTarget{sudoSecret: c.SudoSecret, where: fmt.Sprintf("%s@%s", c.User, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))}
	// Patterns were compiled once by Validate; this cannot fail.
	st.rules, st.err = sshRules(name, c)
	if st.err != nil {
		return st
	}
	var build func(name string, depth int) (*sshexec.Target, error)
	build = func(name string, depth int) (*sshexec.Target, error) {
		c := cfg.SSH[name]
		t := &sshexec.Target{
			Name: name, Host: c.Host, Port: c.Port, User: c.User,
			KnownHostsPath: c.KnownHosts, HostKey: c.HostKey,
			MaxSessions: c.MaxSessions, MaxConnections: c.MaxConnections, Keepalive: c.Keepalive,
			StopMode: sshexec.StopMode(c.StopMode), UsePTY: c.PTY,
			HostKeyAlias: c.HostKeyAlias, ConnectTimeout: c.ConnectTimeout, AgentSocket: c.IdentityAgent,
		}
		var err1, err2, err3, err4 error
		t.Auth.PrivateKey, err1 = secretBytes(c.KeySecret, values, errs)
		t.Auth.Passphrase, err2 = secretBytes(c.PassphraseSecret, values, errs)
		t.Auth.Password, err3 = secretBytes(c.PasswordSecret, values, errs)
		t.Auth.Agent = c.Agent
		t.Auth.KeySecret, t.Auth.PassphraseSecret, t.Auth.PasswordSecret = c.KeySecret, c.PassphraseSecret, c.PasswordSecret
		t.Auth.Certificate, err4 = certificateBytes(c, values, errs)
		t.Auth.CertificateSecret, t.Auth.CertificatePath = c.CertificateSecret, c.Certificate
		var err5 error
		if c.CASecret != "" {
			var ca []byte
			if ca, err5 = secretBytes(c.CASecret, values, errs); err5 == nil {
				t.Auth.CA, err5 = sshexec.ParseCA(name, c.CASecret, ca)
			}
			t.Auth.CASecret, t.CertTTL, t.CertSourceAddress, t.SFTPCommand = c.CASecret, c.CertTTL, c.CertSourceAddress, c.SFTPServer
		}
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		if c.Jump != "" {
			j, err := build(c.Jump, depth+1)
			if err != nil {
				return nil, fmt.Errorf("the jump host of target %q: %w", name, err)
			}
			t.Jump = j
		} else {
			t.Jump = proxyJump(t, c)
		}
		return t, nil
	}
	st.inputs, st.inputErrs = map[string][]byte{}, map[string]error{}
	for _, name := range c.AllowSecretInput {
		if v, err := secretBytes(name, values, errs); err != nil {
			st.inputErrs[name] = err
		} else {
			st.inputs[name] = v
		}
	}
	if st.sudoPassword, st.err = secretBytes(c.SudoSecret, values, errs); st.err != nil {
		st.err = fmt.Errorf("target %q: %w", name, st.err)
		return st
	}
	st.target, st.err = build(name, 0)
	if st.err == nil {
		// A key that does not parse is reported now, not at the dial.
		st.err = st.target.Validate()
	}
	return st
}

// via returns how an endpoint reaches its via, the SSH target name:
// through a direct-tcpip channel of the target's pooled connection in
// pool; or the error that keeps the target from being used.
func (tg *targets) via(pool *sshexec.Pool) func(name string) (*httpact.Via, error) {
	return func(name string) (*httpact.Via, error) {
		st := tg.ssh[name]
		if st.err != nil {
			return nil, fmt.Errorf("its via, SSH target %q: %w", name, st.err)
		}
		t := st.target
		return &httpact.Via{Name: name, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return pool.DialTCP(ctx, t, addr)
		}}, nil
	}
}

// buildHTTPEndpoint builds endpoint name of cfg with the secrets that
// loaded (values; errs for those that did not), its via and token_via
// from via.
func buildHTTPEndpoint(cfg *config.Config, name string, values map[string]secrets.Value, errs map[string]error,
	via func(name string) (*httpact.Via, error)) *httpEndpoint {
	c := cfg.HTTP[name]
	he := &httpEndpoint{rules: httpRules(name, c)}
	e := &httpact.Endpoint{
		Name: name, BaseURL: c.BaseURL, MaxRequestBody: c.MaxRequestBytes,
		// httpact checks the normalized path, on every redirect hop too.
		Allow:           he.rules.Check,
		MaxResponseBody: cfg.Server.RetainHeadBytes + cfg.Server.RetainTailBytes + c.DrainCap,
		AllowPrivate:    c.AllowPrivate, FollowRedirects: c.FollowRedirects,
		Proxy: c.Proxy, ProxyFromEnvironment: c.UseEnvProxy,
		HeaderAllow: c.HeaderAllow, HeaderDeny: c.HeaderDeny, ResponseHeaders: c.ResponseHeaders,
		AllowSpecialHeaders: c.AllowSpecialHeaders, MaxURLBytes: c.MaxURLBytes, MaxHeaderBytes: c.MaxHeaderBytes,
		Retry: httpact.RetryPolicy{MaxAttempts: c.MaxAttempts},
		Auth:  httpAuth(c, values),
	}
	he.endpoint = e
	if e.Auth.OAuth2 != nil {
		he.refreshSecret = c.RefreshTokenSecret
	}
	// The endpoint's channels share the via target's pooled connection,
	// at most its max_sessions at once.
	var err1, err2 error
	if c.Via != "" {
		e.Via, err1 = via(c.Via)
		e.MaxConns = cfg.SSH[c.Via].MaxSessions
	}
	if c.TokenVia != "" && e.Auth.OAuth2 != nil {
		e.Auth.OAuth2.Via, err2 = via(c.TokenVia)
	}
	if err := errors.Join(err1, err2); err != nil {
		he.err = fmt.Errorf("endpoint %q: %w", name, err)
		return he
	}
	if c.CAFile != "" { // checked at load; read again in case it changed
		var err error
		if e.RootCAs, err = httpact.LoadCAFile(c.CAFile); err != nil {
			he.err = &httpact.EndpointError{Endpoint: name, Field: "ca_file", Reason: err.Error()}
			return he
		}
	}
	// The secrets the endpoint uses, in this order in the error.
	names := []string{c.TokenSecret, c.PasswordSecret, c.ClientKeySecret}
	if e.Auth.OAuth2 != nil {
		names = append(names, c.ClientSecretSecret, c.RefreshTokenSecret)
	}
	var failed []error
	for _, s := range names {
		if _, err := secretBytes(s, values, errs); err != nil {
			failed = append(failed, err)
		}
	}
	if err := errors.Join(failed...); err != nil {
		he.err = fmt.Errorf("endpoint %q: %w", name, err)
		return he
	}
	if c.ClientCert != "" {
		// The file was checked at load; the pair is checked now, so that
		// a wrong key fails this endpoint (and check) before any dial.
		var err error
		if e.ClientCert, err = httpact.LoadClientCert(c.ClientCert, values[c.ClientKeySecret].Reveal(), c.ClientKeySecret); err != nil {
			he.err = &httpact.EndpointError{Endpoint: name, Field: "client_key_secret", Reason: err.Error()}
			return he
		}
	}
	// Config judged the file; this is httpact's judgement of what only
	// it checks (a base path not normalized, the header lists, the
	// injected header's name), made once and carried in he.err to check
	// and to every call. Check and Do run it again to protect httpact
	// itself.
	he.err = e.Validate()
	return he
}

// httpAuth is endpoint c's credential with the secrets of values; one
// that did not load is nil, and the endpoint is not used.
func httpAuth(c *config.HTTPEndpoint, values map[string]secrets.Value) httpact.Auth {
	reveal := func(name string) []byte {
		if v, ok := values[name]; ok {
			return v.Reveal()
		}
		return nil
	}
	a := httpact.Auth{Kind: c.Auth, User: []byte(c.User), Header: c.Header, Param: c.Param,
		Token: reveal(c.TokenSecret), Password: reveal(c.PasswordSecret)}
	if kind, _ := httpact.LookupAuthKind(c.Auth); kind.OAuth2 {
		a.OAuth2 = &httpact.OAuth2{TokenURL: c.TokenURL, ClientID: c.ClientID, Scopes: c.Scopes,
			ClientSecret: reveal(c.ClientSecretSecret), RefreshToken: reveal(c.RefreshTokenSecret)}
	}
	return a
}

// derivedSecrets returns what the redactor must know of endpoint c's
// secrets besides their values: each form its auth kind derives from
// them (httpact.AuthKind.Derived, such as the "user:password" that Basic
// auth base64s), under the name of the secret it holds, when that secret
// loaded.
func derivedSecrets(c *config.HTTPEndpoint, values map[string]secrets.Value) []redact.Secret {
	kind, ok := httpact.LookupAuthKind(c.Auth)
	if !ok {
		return nil
	}
	auth, keys := httpAuth(c, values), c.AuthSettings()
	var known []redact.Secret
	for _, d := range kind.Derived(&auth) {
		if name := keys[d.Key]; name != "" {
			if _, ok := values[name]; ok {
				known = append(known, redact.Secret{Name: name, Value: d.Value})
			}
		}
	}
	return known
}

// TargetCheck is what `actiongw check` reports of one target.
type TargetCheck struct {
	Kind   string // "ssh", "http" or "audit"
	Name   string
	Detail string // what was verified, when Err is nil
	Err    error
}

// CheckTargets builds every target from cfg and store and tries each as a
// call would, within timeout: SSH targets are dialled, their host keys
// verified and the login tried; HTTP endpoints are connected to through the
// address guard or their via's SSH target (a direct-tcpip channel, whose
// refusal says which sshd_config line allows it), with the TLS handshake
// for https, sending no request, and
// one with OAuth2 client credentials fetches an access token;
// the audit log's syslog receiver, if any, is connected to (Kind "audit").
// The
// errors are the ones a tool call would get, such as *sshexec.HostKeyError
// with the presented fingerprint.
func CheckTargets(ctx context.Context, cfg *config.Config, store SecretStore, log *slog.Logger, timeout time.Duration) []TargetCheck {
	pool, client := sshexec.NewPool(log), httpact.NewClient(log)
	tg, _, _ := loadTargets(ctx, cfg, store, pool, log)
	defer pool.Close()
	defer client.Close()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		checks []TargetCheck
	)
	check := func(kind, name string, err error, detail string, try func(context.Context) error) {
		wg.Go(func() {
			c := TargetCheck{Kind: kind, Name: name, Err: err}
			if c.Err == nil {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				c.Err, c.Detail = try(cctx), detail
				cancel()
			}
			mu.Lock()
			checks = append(checks, c)
			mu.Unlock()
		})
	}
	for name, st := range tg.ssh {
		t := cfg.SSH[name]
		detail := fmt.Sprintf("host key verified, logged in as %s@%s:%d", t.User, t.Host, t.Port)
		if t.CASecret != "" {
			detail += fmt.Sprintf(" with a certificate of the CA %q forced to run `true`, which it ran", t.CASecret)
		}
		check("ssh", name, st.err, detail,
			func(ctx context.Context) error {
				err := pool.Check(ctx, st.target)
				if hk := (*sshexec.HostKeyError)(nil); errors.As(err, &hk) && hk.Unknown() && asksHostKey(cfg, hk.Target) {
					return fmt.Errorf("%w; with host_key_policy = \"ask\", the first call shows this key to the person at the MCP client, who may trust it", err)
				}
				return err
			})
	}
	for name, he := range tg.http {
		c := cfg.HTTP[name]
		detail := "connected to " + c.BaseURL
		switch proxy := c.ProxyAddr(); {
		case c.Via != "":
			detail += fmt.Sprintf(" through SSH target %q (its sshd opened a direct-tcpip channel to it)", c.Via)
		case proxy == "":
		case strings.HasPrefix(strings.ToLower(c.BaseURL), "https:"):
			detail += " through the proxy " + proxy + " (CONNECT)"
		default: // Probe reaches only the proxy
			detail = "connected to the proxy " + proxy + ", which reaches " + c.BaseURL + " for each request"
		}
		try := func(ctx context.Context) error { return client.Probe(ctx, he.endpoint) }
		switch c.Auth {
		case httpact.AuthOAuth2ClientCredentials:
			detail += "; an access token fetched from " + c.TokenURL
			if c.TokenVia != "" {
				detail += fmt.Sprintf(" through SSH target %q", c.TokenVia)
			}
			if o := he.endpoint.Auth.OAuth2; o != nil {
				// The token is only fetched: it reaches no output to redact.
				o.OnToken = func([]byte, time.Time) error { return nil }
			}
			try = func(ctx context.Context) error {
				if err := client.Probe(ctx, he.endpoint); err != nil {
					return err
				}
				return client.ProbeToken(ctx, he.endpoint)
			}
		case httpact.AuthOAuth2RefreshToken:
			detail += "; no access token fetched (a refresh token may be rotated on use)"
		}
		check("http", name, he.err, detail+" (no request sent)", try)
	}
	if cfg.Audit.Syslog != "" {
		ec, err := exportConfig(cfg.Audit, log)
		detail := "connected to the syslog receiver " + ec.Addr
		if ec.TLS != nil {
			detail += " over TLS, its certificate verified for " + ec.TLS.ServerName
		}
		check("audit", "syslog", err, detail+" (no record sent)",
			func(ctx context.Context) error { return auditexport.Probe(ctx, ec.Addr, ec.TLS) })
	}
	wg.Wait()
	slices.SortFunc(checks, func(a, b TargetCheck) int { return strings.Compare(a.Kind+a.Name, b.Kind+b.Name) })
	return checks
}
