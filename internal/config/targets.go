package config

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/policy"
)

// The values of SSHTarget.Approve, as policy decides them.
const (
	ApproveNever    = policy.ApproveNever
	ApproveAlways   = policy.ApproveAlways
	ApproveUnlisted = policy.ApproveUnlisted
)

// SSHTarget is one host an agent may run commands on.
type SSHTarget struct {
	Description string `toml:"description"`
	Host        string `toml:"host"`
	Port        int    `toml:"port" default:"22"`
	User        string `toml:"user"`

	// Exactly one way to authenticate: KeySecret (with an optional
	// PassphraseSecret), PasswordSecret, Agent (the user's ssh-agent), or
	// CASecret.
	KeySecret        string `toml:"key_secret"`
	PassphraseSecret string `toml:"passphrase_secret"`
	PasswordSecret   string `toml:"password_secret"`
	Agent            bool   `toml:"agent"`
	// CASecret names a CA key made by `actiongw ca init NAME`: every
	// action logs in on a connection of its own with a new key and a
	// certificate the CA signs for that action alone (its command as the
	// force-command, the user as principal, the handle as key id), which
	// the host's sshd enforces (TrustedUserCAKeys). CertTTL is how long
	// such a certificate can log in after it is signed; CertSourceAddress
	// its source-address option (addresses or CIDR ranges, comma
	// separated), empty for none; SFTPServer the force-command of a file
	// transfer's certificate: "internal-sftp" or the absolute path of the
	// host's sftp-server, as its sshd_config's Subsystem line says.
	CASecret          string        `toml:"ca_secret"`
	CertTTL           time.Duration `toml:"cert_ttl" default:"2m"`
	CertSourceAddress string        `toml:"cert_source_address"`
	SFTPServer        string        `toml:"sftp_server" default:"internal-sftp"`

	// KnownHosts is the known_hosts file that verifies the host key, unless
	// HostKey pins a "SHA256:…" fingerprint instead. Verification cannot
	// be switched off.
	KnownHosts string `toml:"known_hosts" default:"~/.ssh/known_hosts"`
	HostKey    string `toml:"host_key"`
	// HostKeyPolicy is "strict": a host key known_hosts does not record is
	// refused; or "ask": the person at the MCP client is shown an unknown
	// key's type and fingerprint and may trust it, which appends its line
	// to known_hosts. A changed or revoked key is refused either way.
	HostKeyPolicy string `toml:"host_key_policy" default:"strict"`
	// Jump names another [ssh.*] target to connect through; empty connects
	// directly.
	Jump string `toml:"jump"`
	// JumpOnly makes the target a jump host and nothing else: other
	// targets connect through it, and no command or file transfer runs on
	// it (a bastion whose login the agent need not have). Default false.
	JumpOnly bool `toml:"jump_only"`

	// AllowCommands are RE2 patterns that must match the whole command;
	// DenyCommands match anywhere in it. Deny wins, and an allow list
	// denies what it does not match; no lists allow every command. See
	// package policy.
	AllowCommands []string `toml:"allow_commands"`
	DenyCommands  []string `toml:"deny_commands"`
	// Approve is "never" (the rules alone decide), "unlisted" (a command
	// no allow_commands pattern matches asks the person at the MCP client
	// instead of being refused) or "always" (every command asks).
	// deny_commands still refuse without asking.
	Approve string `toml:"approve" default:"never"`

	// Timeout applies when a call gives none; MaxTimeout caps what a call asks.
	Timeout    time.Duration `toml:"timeout" default:"60s"`
	MaxTimeout time.Duration `toml:"max_timeout" default:"30m"`
	// OutputLimit stops the command once this many bytes arrived; zero
	// means no limit (output is still bounded in memory).
	OutputLimit int64 `toml:"output_limit"`
	// MaxStdinBytes bounds the stdin a call may send, MaxCommandBytes its
	// command.
	MaxStdinBytes   int64 `toml:"max_stdin_bytes" default:"1048576"`
	MaxCommandBytes int   `toml:"max_command_bytes" default:"65536"`
	// MaxSessions bounds sessions per connection: OpenSSH's MaxSessions.
	MaxSessions int `toml:"max_sessions" default:"10"`
	// MaxConnections bounds the connections opened to this target: a
	// second one opens when every session of the first is in use.
	MaxConnections int `toml:"max_connections" default:"2"`
	// Keepalive is the interval of keepalive requests on a connection.
	Keepalive time.Duration `toml:"keepalive" default:"15s"`
	// StopMode is "signal" (send TERM/KILL, fall back to killing the
	// wrapped process group) or "wrapper" (always the fallback).
	StopMode string `toml:"stop_mode" default:"signal"`
	// PTY runs the command on a pseudo-terminal (stdout and stderr merge).
	PTY bool `toml:"pty"`
	// MaxConcurrent bounds actions running at once on this target; zero
	// means only the server limit applies.
	MaxConcurrent int `toml:"max_concurrent"`
	// Cwd is the directory commands run in unless a call gives one; empty
	// is the login directory.
	Cwd string `toml:"cwd"`
	// AllowCwd are the directories a command may run in (a call's cwd, or
	// Cwd), as allow_paths patterns: absolute, "*" for one segment, a
	// final "**" for a directory and all under it. A directory is matched
	// as cleaned ("..", "//" and trailing slashes resolved as text, symlinks
	// not followed), and a relative one is refused. The directory decides
	// which file a relative program ("./run.sh") is, so a person who lists
	// one in allow_commands lists here where it may run; with AllowCwd,
	// Cwd is required and must match it. Empty allows any directory.
	AllowCwd []string `toml:"allow_cwd"`
	// Env is set for every command on this target; a call's env adds to
	// it and wins, for the names AllowEnv allows.
	Env map[string]string `toml:"env"`
	// AllowEnv are the names (globs, e.g. "APP_*") of the variables a call
	// may set; empty allows none. A variable can change what an allowed
	// command does (PATH, LD_PRELOAD), so the person chooses which.
	AllowEnv []string `toml:"allow_env"`
	// AllowSudo lets a call run its command as root under sudo (sudo:
	// true); SudoSecret names the keyring item with the login user's sudo
	// password, sent on stdin and never in an argument; empty means sudo
	// needs none (sudo -n).
	AllowSudo  bool   `toml:"allow_sudo"`
	SudoSecret string `toml:"sudo_secret"`

	// AllowPaths and DenyPaths are the remote paths ssh_download and
	// ssh_upload may use (see policy.Paths): absolute, with "*" for one
	// segment and a final "**" for a directory and all under it. Deny
	// wins; no AllowPaths means no file transfers on this target.
	AllowPaths []string `toml:"allow_paths"`
	DenyPaths  []string `toml:"deny_paths"`
	// MaxUploadBytes bounds one upload; MaxDownloadBytes stops a download
	// there, keeping what arrived.
	MaxUploadBytes   int64 `toml:"max_upload_bytes" default:"1073741824"`
	MaxDownloadBytes int64 `toml:"max_download_bytes" default:"1073741824"`

	// Certificate is an OpenSSH user certificate file (*-cert.pub) for the
	// key (key_secret, or the agent's); "~/" is expanded. It is public, so
	// a file is fine; CertificateSecret names a keyring item holding one
	// instead. At most one of them; empty offers no certificate.
	Certificate       string `toml:"certificate"`
	CertificateSecret string `toml:"certificate_secret"`

	// AllowSessions lets ssh_session_start open interactive terminal
	// sessions on the target (docs/sessions.md); default false. approve
	// and allow_commands apply to what the session runs (the command, or
	// the login shell as sshexec.LoginShell). AllowSecretInput names the
	// keyring items ssh_session_send may type into a session (secret:
	// NAME), never shown to the agent. MaxTerminalSessions bounds the
	// sessions open at once on the target; SessionIdleTimeout ends a
	// session nobody sent input to for that long.
	AllowSessions       bool          `toml:"allow_sessions"`
	AllowSecretInput    []string      `toml:"allow_secret_input"`
	MaxTerminalSessions int           `toml:"max_terminal_sessions" default:"2"`
	SessionIdleTimeout  time.Duration `toml:"session_idle_timeout" default:"10m"`

	// Set from the ssh config when host is a Host alias in it, when the
	// config loads; no TOML keys. HostKeyAlias is the name known_hosts
	// records the host key under, empty for host:port. ConnectTimeout
	// bounds each connection's dial and handshake; zero leaves only the
	// action's timeout. IdentityAgent is the ssh-agent socket of a target
	// with agent = true; empty means $SSH_AUTH_SOCK. ProxyJump is the
	// chain of hops to tunnel through when jump is not set; empty connects
	// directly.
	HostKeyAlias   string        `toml:"-"`
	ConnectTimeout time.Duration `toml:"-"`
	IdentityAgent  string        `toml:"-"`
	ProxyJump      []SSHHop      `toml:"-"`
}

// MaxGroupTargets bounds the targets of a group, and of one ssh_exec_many:
// its result names every target with its handle.
const MaxGroupTargets = 256

// Group is a set of SSH targets for ssh_exec_many.
type Group struct {
	Description string `toml:"description"`
	// Targets are target names and globs over them ("web-*"); each must
	// name or match at least one [ssh.*] target.
	Targets []string `toml:"targets"`
}

// Targets resolves patterns, each the name of an SSH target or a glob over
// the names (path.Match: "web-*", "db[12]"), to the targets they name,
// sorted and without repeats. A pattern that names or matches no target is
// an error that says so: a typo must not shrink a fleet silently. A
// jump_only target is none of them: naming it is an error, and globs pass
// over it.
func (c *Config) Targets(patterns []string) ([]string, error) {
	seen := map[string]bool{}
	for _, p := range patterns {
		if t, ok := c.SSH[p]; ok {
			if t.JumpOnly {
				return nil, fmt.Errorf("%q is a jump host only (jump_only): no command runs on it", p)
			}
			seen[p] = true
			continue
		}
		matched := false
		for name, t := range c.SSH {
			if ok, err := path.Match(p, name); err != nil {
				return nil, fmt.Errorf("%q is not a glob: %v", p, err)
			} else if ok && !t.JumpOnly {
				seen[name], matched = true, true
			}
		}
		if !matched {
			return nil, fmt.Errorf("%q names no SSH target and matches none", p)
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// MaxEnv, MaxEnvValueBytes and MaxCwdBytes bound the environment and the
// directory of a command, from the config and from a call together; policy
// holds a call to them.
const (
	MaxEnv           = policy.MaxEnv
	MaxEnvValueBytes = policy.MaxEnvValueBytes
	MaxCwdBytes      = policy.MaxCwdBytes
)

// HTTPEndpoint is one HTTP API an agent may call under its base URL.
type HTTPEndpoint struct {
	Description string   `toml:"description"`
	BaseURL     string   `toml:"base_url"`
	Methods     []string `toml:"methods" default:"GET"`
	// Paths are glob patterns under the base URL ("/repos/**"); empty
	// allows every path under it.
	Paths []string `toml:"paths"`
	// ApproveMethods are the methods (of Methods) whose requests ask the
	// person at the MCP client before they are sent.
	ApproveMethods []string `toml:"approve_methods"`

	// Auth is none, bearer, basic, header, query,
	// oauth2_client_credentials or oauth2_refresh_token: a row of
	// httpact.AuthKinds, which says which of the keys below it needs.
	Auth           string `toml:"auth" default:"none"`
	TokenSecret    string `toml:"token_secret"`
	User           string `toml:"user"`
	PasswordSecret string `toml:"password_secret"`
	// Header names the header for auth = "header"; Param the query
	// parameter for auth = "query".
	Header string `toml:"header"`
	Param  string `toml:"param"`
	// TokenURL and ClientID are for the OAuth2 kinds; ClientSecretSecret
	// names the client secret (required by oauth2_client_credentials,
	// optional for oauth2_refresh_token), Scopes what the client
	// credentials grant asks for (empty: the server's default), and
	// RefreshTokenSecret the refresh token of oauth2_refresh_token, where
	// a rotated one is written back.
	TokenURL           string   `toml:"token_url"`
	ClientID           string   `toml:"client_id"`
	ClientSecretSecret string   `toml:"client_secret_secret"`
	Scopes             []string `toml:"scopes"`
	RefreshTokenSecret string   `toml:"refresh_token_secret"`

	// AllowPrivate lets the endpoint reach loopback and private addresses.
	AllowPrivate bool `toml:"allow_private"`
	// CAFile is a PEM file of CA certificates the endpoint's server
	// certificate may chain to, trusted besides the system roots and for
	// this endpoint only; "~/" is expanded. Empty trusts the system roots.
	CAFile string `toml:"ca_file"`
	// ClientCert is a PEM file of the client certificate (the leaf, then
	// any intermediates) presented to a server that asks for one (mutual
	// TLS); "~/" is expanded. It is public, so a file is fine; its private
	// key is in the keyring item ClientKeySecret. Both or neither; empty
	// presents none.
	ClientCert      string `toml:"client_cert"`
	ClientKeySecret string `toml:"client_key_secret"`
	// Proxy is an HTTP proxy, "http://host:port" without a user name or
	// password, that the endpoint's requests and its OAuth2 token fetches
	// go through; an https request crosses it inside CONNECT, so it sees
	// only the host and port. Empty uses none, unless UseEnvProxy.
	Proxy string `toml:"proxy"`
	// UseEnvProxy takes the proxy from serve's environment: HTTPS_PROXY
	// for https, HTTP_PROXY for http, except the hosts NO_PROXY lists and
	// loopback. Not with Proxy.
	UseEnvProxy bool `toml:"use_env_proxy"`
	// Via names an [ssh.*] target (jump_only or not) whose server opens
	// the endpoint's connections, as ssh -L does, over its pooled
	// connection: the base URL's host is resolved by that server and may
	// be a loopback or private address there without allow_private (not
	// link-local or metadata). TokenVia is the same for the OAuth2 token
	// URL: the same target, another, or empty to fetch tokens from this
	// host. Neither with proxy or use_env_proxy. Empty connects from this
	// host.
	Via      string `toml:"via"`
	TokenVia string `toml:"token_via"`
	// FollowRedirects is "none" or "same-origin".
	FollowRedirects string `toml:"follow_redirects" default:"none"`

	Timeout         time.Duration `toml:"timeout" default:"30s"`
	MaxTimeout      time.Duration `toml:"max_timeout" default:"5m"`
	MaxRequestBytes int64         `toml:"max_request_bytes" default:"1048576"`
	// MaxURLBytes bounds a call's path and query together, MaxHeaderBytes
	// its headers (names and values).
	MaxURLBytes    int `toml:"max_url_bytes" default:"8192"`
	MaxHeaderBytes int `toml:"max_header_bytes" default:"16384"`
	// DrainCap is how much of a body is read past the retained part
	// before the request is aborted.
	DrainCap int64 `toml:"drain_cap" default:"67108864"`
	// HeaderAllow, if set, lists the only headers an agent may send;
	// HeaderDeny lists more it may not.
	HeaderAllow []string `toml:"header_allow"`
	HeaderDeny  []string `toml:"header_deny"`
	// AllowSpecialHeaders lists headers, refused by default, that this
	// endpoint may send: those that change the form of the response
	// (Accept-Encoding, Accept-Charset, A-IM, Range, Request-Range,
	// If-Range), which could bring a credential back encoded or in pieces,
	// past redaction, and those that change the method or the route
	// (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override,
	// X-Original-URL, X-Rewrite-URL), which could carry a call past the
	// methods and paths allowed. See package httpact.
	AllowSpecialHeaders []string `toml:"allow_special_headers"`
	// ResponseHeaders lists the response headers returned to the agent.
	ResponseHeaders []string `toml:"response_headers" default:"Content-Type,Content-Length,Location,Retry-After,ETag,X-Request-Id,Request-Id"`
	// MaxAttempts bounds retries of idempotent requests (1: no retry).
	MaxAttempts int `toml:"max_attempts" default:"3"`
	// MaxConcurrent bounds actions running at once on this endpoint; zero
	// means only the server limit applies.
	MaxConcurrent int `toml:"max_concurrent"`
}

// ProxyAddr returns the host and port of the proxy that a request to the
// endpoint's base URL goes through ("" for none), reading the environment
// for UseEnvProxy.
func (e *HTTPEndpoint) ProxyAddr() string {
	return httpact.ProxyFor(e.Proxy, e.UseEnvProxy, e.BaseURL)
}

// AuthSettings returns the endpoint's auth settings by config key, ""
// for one not set (scopes joined by spaces): the keys an
// httpact.AuthKind needs, may use, or refuses.
func (e *HTTPEndpoint) AuthSettings() map[string]string {
	return map[string]string{"token_secret": e.TokenSecret, "user": e.User, "password_secret": e.PasswordSecret,
		"header": e.Header, "param": e.Param, "token_url": e.TokenURL, "client_id": e.ClientID,
		"client_secret_secret": e.ClientSecretSecret, "scopes": strings.Join(e.Scopes, " "),
		"refresh_token_secret": e.RefreshTokenSecret}
}

// SecretNames returns every keyring item the config references, sorted and
// without duplicates.
func (c *Config) SecretNames() []string {
	var names []string
	for _, t := range c.SSH {
		names = append(names, t.SecretNames()...)
	}
	for _, e := range c.HTTP {
		names = append(names, e.SecretNames()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// SecretNames returns the keyring items the target itself uses (not those
// of its jump host), sorted and without duplicates.
func (t *SSHTarget) SecretNames() []string {
	return secretNames(append([]string{t.KeySecret, t.PassphraseSecret, t.PasswordSecret, t.SudoSecret, t.CertificateSecret, t.CASecret}, t.AllowSecretInput...)...)
}

// SecretNames returns the keyring items the endpoint uses, sorted and
// without duplicates.
func (e *HTTPEndpoint) SecretNames() []string {
	return secretNames(e.TokenSecret, e.PasswordSecret, e.ClientKeySecret, e.ClientSecretSecret, e.RefreshTokenSecret)
}

func secretNames(names ...string) []string {
	names = slices.DeleteFunc(names, func(s string) bool { return s == "" })
	slices.Sort(names)
	return slices.Compact(names)
}

// GuessableSecrets returns, for every keyring item the config names in a
// field whose value could be found by guessing, the fields that name it
// ("ssh.web1.password_secret"), sorted. Those fields hold what a person
// picks or a service may issue short: the passwords (password_secret,
// sudo_secret, and basic auth's password_secret), a key's passphrase, the
// tokens (token_secret, for bearer, header and query auth; OAuth2's
// refresh_token_secret) and OAuth2 client secrets. Private keys
// (key_secret, client_key_secret) and certificates (certificate_secret)
// are not: a key is a large random number, a certificate is public.
func (c *Config) GuessableSecrets() map[string][]string {
	fields := map[string][]string{}
	add := func(prefix string, named map[string]string) {
		for field, name := range named {
			if name != "" {
				fields[name] = append(fields[name], prefix+"."+field)
			}
		}
	}
	for name, t := range c.SSH {
		add("ssh."+name, map[string]string{"password_secret": t.PasswordSecret, "passphrase_secret": t.PassphraseSecret, "sudo_secret": t.SudoSecret})
	}
	for name, e := range c.HTTP {
		add("http."+name, map[string]string{"token_secret": e.TokenSecret, "password_secret": e.PasswordSecret,
			"client_secret_secret": e.ClientSecretSecret, "refresh_token_secret": e.RefreshTokenSecret})
	}
	for _, f := range fields {
		slices.Sort(f)
	}
	return fields
}
