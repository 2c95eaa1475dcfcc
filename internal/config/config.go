package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// Config is the whole configuration: server limits and the targets an agent
// may name. It holds names of keyring items, never credential values.
//
// Every default is stated once, in the `default` tag of its field: Default
// applies those of Server, and SetDefaults (which Parse calls) those of
// every target. A field without a tag defaults to its zero value, whose
// meaning its comment gives.
type Config struct {
	Server Server                   `toml:"server"`
	Audit  Audit                    `toml:"audit"`
	SSH    map[string]*SSHTarget    `toml:"ssh"`
	HTTP   map[string]*HTTPEndpoint `toml:"http"`
	// Group names sets of SSH targets that ssh_exec_many runs a command on.
	Group map[string]*Group `toml:"group"`
	// Approval is how a person is asked before an action that needs
	// approval (a target's approve, an endpoint's approve_methods, a
	// host_key_policy of "ask").
	Approval Approval `toml:"approval"`
	// Warnings are what loading found wrong but could go on without (the
	// default ssh config unreadable); serve logs them and check shows
	// them.
	Warnings []string `toml:"-"`
}

// Server holds the limits of the server itself.
type Server struct {
	// StateDir holds the spool and the audit log; "~/" is expanded. Its
	// default depends on the environment: $XDG_STATE_HOME/actiongw, else
	// ~/.local/state/actiongw.
	StateDir string `toml:"state_dir"`
	// MaxFrameBytes is the wire limit: the largest incoming JSON-RPC frame.
	MaxFrameBytes int `toml:"max_frame_bytes" default:"4194304"`
	// ResultBytes is the content limit: the largest serialized tool result.
	ResultBytes int `toml:"result_bytes" default:"65536"`
	// MaxConcurrentActions bounds actions running at once.
	MaxConcurrentActions int `toml:"max_concurrent_actions" default:"16"`
	// QueueWait is how long a call waits for a free action slot, or for a
	// session of its SSH target, before it is refused as busy.
	QueueWait time.Duration `toml:"queue_wait" default:"10s"`
	// Wait is how long an action call (and action_status) waits for the
	// action to finish; one still running then is returned with status
	// running and its handle, and goes on under its own timeout. It is
	// below the 60 s many MCP clients give a tool call. Zero starts every
	// action in the background unless the call asks to wait (wait_s).
	Wait time.Duration `toml:"wait" default:"50s"`
	// MaxBackgroundActions bounds the actions running after their call
	// returned; when it is reached, a call that would return early waits
	// for its action to end instead, and wait_s = 0 is refused as busy.
	// Background actions also count against max_concurrent_actions and
	// their target's max_concurrent.
	MaxBackgroundActions int `toml:"max_background_actions" default:"8"`
	// MaxConcurrentReads bounds read_output and search_output calls
	// running at once; more wait for a turn.
	MaxConcurrentReads int `toml:"max_concurrent_reads" default:"4"`
	// MaxParallel is how many targets one ssh_exec_many runs its command
	// on at once unless the call asks for another number; a call may ask
	// for up to max_concurrent_actions.
	MaxParallel int `toml:"max_parallel" default:"8"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level" default:"info"`
	// HeadBytes and TailBytes are the in-memory preview of each stream;
	// zero keeps none.
	HeadBytes int `toml:"head_bytes" default:"4096"`
	TailBytes int `toml:"tail_bytes" default:"4096"`
	// RetainHeadBytes and RetainTailBytes are what the spool keeps on disk
	// of each stream for read_output and search_output; zero keeps none.
	RetainHeadBytes int64 `toml:"retain_head_bytes" default:"1048576"`
	RetainTailBytes int64 `toml:"retain_tail_bytes" default:"8388608"`
	// SpoolTTL and SpoolMaxBytes evict finished actions from the spool.
	SpoolTTL      time.Duration `toml:"spool_ttl" default:"24h"`
	SpoolMaxBytes int64         `toml:"spool_max_bytes" default:"1073741824"`
	// AuditRotateBytes is the size at which the audit log is rotated; the
	// hash chain continues in the next file.
	AuditRotateBytes int64 `toml:"audit_rotate_bytes" default:"67108864"`
	// SSHConfig is the OpenSSH client config whose Host aliases a
	// target's host may name; "~/" is expanded. The default is read only
	// when it exists, another file must exist; "none" reads none. See
	// resolveSSHConfig.
	SSHConfig string `toml:"ssh_config" default:"~/.ssh/config"`
}

// Approval is how the person at the MCP client is asked, through MCP
// elicitation, before an action runs.
type Approval struct {
	// Timeout is how long a question waits for its answer; no answer in
	// that time denies the action.
	Timeout time.Duration `toml:"timeout" default:"2m"`
	// Remember, when set, offers a third answer: approve the same exact
	// action (target, command, stdin, sudo, directory and environment; or
	// method, path, headers and body) for this long. Zero offers only
	// approve once and deny.
	Remember time.Duration `toml:"remember"`
}

// The values of SSHTarget.Approve.
const (
	ApproveNever    = "never"
	ApproveAlways   = "always"
	ApproveUnlisted = "unlisted"
)

// Audit is where the audit trail goes besides the local log, which stays
// the durable record. Like [server], it takes effect when the server
// starts.
type Audit struct {
	// Syslog is the receiver every record is also sent to, as RFC 5424
	// over TCP with octet-counting framing (RFC 6587): "tcp://host:port",
	// or "tls://host:port" for TLS (RFC 5425). Empty sends none. UDP is
	// refused: a datagram lost or cut is gone without a trace.
	Syslog string `toml:"syslog"`
	// SyslogCAFile is a PEM file of CA certificates the receiver's
	// certificate may chain to, trusted besides the system roots; "~/" is
	// expanded. Empty trusts the system roots. Only with tls://.
	SyslogCAFile string `toml:"syslog_ca_file"`
	// SyslogServerName is the name the receiver's certificate must carry;
	// empty means the host of Syslog. Only with tls://.
	SyslogServerName string `toml:"syslog_server_name"`
	// SyslogQueueBytes bounds the records waiting to be sent (their JSON
	// lines): some 10,000 typical records, at least 256 of the largest. A
	// record that does not fit is dropped, counted and logged; the action
	// never waits.
	SyslogQueueBytes int `toml:"syslog_queue_bytes" default:"16777216"`
}

// SyslogAddr returns the host:port of Syslog and whether it asks for
// TLS. Its errors say what a valid value is.
func (a *Audit) SyslogAddr() (addr string, useTLS bool, err error) {
	u, err := url.Parse(a.Syslog)
	if err != nil || !strings.Contains(a.Syslog, "://") {
		// Not quoted: a mistyped value could hold anything.
		return "", false, errors.New(`must be "tcp://host:port" or "tls://host:port"`)
	}
	switch u.Scheme {
	case "tcp":
	case "tls":
		useTLS = true
	case "udp":
		return "", false, errors.New(`udp is refused: syslog over UDP has no delivery at all (a datagram that is lost, or cut at the receiver's size limit, is gone without a trace, and nothing tells the sender), which an audit trail cannot accept; use "tcp://host:port" or "tls://host:port"`)
	default:
		return "", false, fmt.Errorf(`unknown scheme %q: must be "tcp://host:port" or "tls://host:port"`, u.Scheme)
	}
	switch {
	case u.User != nil, u.Path != "", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return "", false, errors.New(`must be only a scheme, a host and a port: "tcp://host:port" or "tls://host:port"`)
	case u.Hostname() == "":
		return "", false, errors.New(`needs a host: "tcp://host:port" or "tls://host:port"`)
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		return "", false, fmt.Errorf(`needs a port, 1-65535, after the host (syslog over TCP is usually 514 or 601, over TLS 6514), got %q`, u.Port())
	}
	return u.Host, useTLS, nil
}

// SSHTarget is one host an agent may run commands on.
type SSHTarget struct {
	Description string `toml:"description"`
	Host        string `toml:"host"`
	Port        int    `toml:"port" default:"22"`
	User        string `toml:"user"`

	// Exactly one way to authenticate: KeySecret (with an optional
	// PassphraseSecret), PasswordSecret, or Agent (the user's ssh-agent).
	KeySecret        string `toml:"key_secret"`
	PassphraseSecret string `toml:"passphrase_secret"`
	PasswordSecret   string `toml:"password_secret"`
	Agent            bool   `toml:"agent"`

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
	return sortedKeys(seen), nil
}

// MaxEnv, MaxEnvValueBytes and MaxCwdBytes bound the environment and the
// directory of a command, from the config and from a call together.
const (
	MaxEnv           = 64
	MaxEnvValueBytes = 4096
	MaxCwdBytes      = 4096
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
	// oauth2_client_credentials or oauth2_refresh_token.
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

// Default returns the configuration used for every field a file leaves out.
func Default() *Config {
	c := &Config{SSH: map[string]*SSHTarget{}, HTTP: map[string]*HTTPEndpoint{}}
	setDefaults(&c.Server)
	setDefaults(&c.Approval)
	setDefaults(&c.Audit)
	c.Server.StateDir = defaultStateDir()
	return c
}

// SetDefaults fills every zero field that has a default, in [server] and in
// every target, and expands "~/" in paths: what Parse does after decoding,
// for a Config built in code.
func (c *Config) SetDefaults() {
	setDefaults(&c.Server)
	setDefaults(&c.Approval)
	setDefaults(&c.Audit)
	if c.Server.StateDir == "" {
		c.Server.StateDir = defaultStateDir()
	}
	c.setTargetDefaults()
}

// setTargetDefaults fills the zero fields of every target and normalizes
// what Validate expects normalized.
func (c *Config) setTargetDefaults() {
	c.Server.StateDir = expandHome(c.Server.StateDir)
	c.Audit.SyslogCAFile = expandHome(c.Audit.SyslogCAFile)
	for _, t := range c.SSH {
		if t == nil {
			continue
		}
		setDefaults(t)
		if t.HostKey != "" {
			t.KnownHosts = "" // the pin replaces the file
		}
		t.KnownHosts = expandHome(t.KnownHosts)
		t.Certificate = expandHome(t.Certificate)
	}
	for _, e := range c.HTTP {
		if e == nil {
			continue
		}
		setDefaults(e)
		e.CAFile = expandHome(e.CAFile)
		e.ClientCert = expandHome(e.ClientCert)
		for i, m := range e.Methods {
			e.Methods[i] = strings.ToUpper(m)
		}
		for i, m := range e.ApproveMethods {
			e.ApproveMethods[i] = strings.ToUpper(m)
		}
	}
}

// setDefaults sets every zero field of the struct p points to from its
// `default` tag. The tags are checked by TestDefaultTags.
func setDefaults(p any) {
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		def, ok := v.Type().Field(i).Tag.Lookup("default")
		if f := v.Field(i); ok && f.IsZero() {
			if err := setFromTag(f, def); err != nil {
				panic(fmt.Sprintf("config: default tag of %s: %v", v.Type().Field(i).Name, err))
			}
		}
	}
}

func setFromTag(f reflect.Value, def string) error {
	switch {
	case f.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(def)
		f.SetInt(int64(d))
		return err
	case f.Kind() == reflect.String:
		f.SetString(def)
	case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(def, 10, 64)
		f.SetInt(n)
		return err
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.ValueOf(strings.Split(def, ",")))
	default:
		return fmt.Errorf("no default for a %s", f.Type())
	}
	return nil
}

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "actiongw")
	}
	return "~/.local/state/actiongw"
}

// DefaultPath is where serve looks when neither -config nor
// $ACTIONGW_CONFIG names a file.
func DefaultPath(getenv func(string) string) string {
	if p := getenv("ACTIONGW_CONFIG"); p != "" {
		return p
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "actiongw", "config.toml")
	}
	return filepath.Join(getenv("HOME"), ".config", "actiongw", "config.toml")
}

// Load reads, decodes and validates the file at path. A file that does not
// load gives an *Error naming path and every problem found; a file that
// cannot be read gives the error of os.ReadFile.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	var cerr *Error
	if errors.As(err, &cerr) {
		cerr.Path = path
	}
	return cfg, err
}

// Parse decodes TOML strictly over [Default], fills the defaults of every
// target and validates the result. Every problem is a *FieldError with the
// key and, where the text shows it, the line; Parse returns them together
// as an *Error.
func Parse(data []byte) (*Config, error) {
	cfg := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(cfg)
	if err != nil {
		return nil, &Error{Problems: []*FieldError{decodeError(err)}}
	}
	var problems []*FieldError
	for _, k := range md.Undecoded() {
		problems = append(problems, undecodedError(data, k))
	}
	problems = append(problems, unitlessDurations(data, md)...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	cfg.setTargetDefaults()
	set := func(target, key string) bool { return md.IsDefined("ssh", target, key) }
	if problems := cfg.resolveSSHConfig(set); len(problems) > 0 {
		for _, p := range problems {
			p.Line = fieldLine(data, p.Field)
		}
		return nil, &Error{Problems: problems}
	}
	if err := cfg.Validate(); err != nil {
		e := &Error{}
		for _, err := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *FieldError
			if !errors.As(err, &fe) {
				fe = &FieldError{Reason: err.Error()}
			}
			fe.Line = fieldLine(data, fe.Field)
			e.Problems = append(e.Problems, fe)
		}
		return nil, e
	}
	return cfg, nil
}

// Error is a configuration that does not load: every problem found, each
// naming its key and line where known.
type Error struct {
	// Path is the file; empty when the text did not come from one.
	Path     string
	Problems []*FieldError
}

// configHelp ends every config error: what to read to fix it.
const configHelp = "every option is described in config.example.toml and in the README (Configuration); after editing, run: actiongw check"

// Error gives one line per problem, "path:line: key: reason", as compilers
// do so that editors can jump to it, then configHelp.
func (e *Error) Error() string {
	var b strings.Builder
	for _, p := range e.Problems {
		if e.Path != "" {
			b.WriteString(e.Path)
			if p.Line > 0 {
				fmt.Fprintf(&b, ":%d", p.Line)
			}
			b.WriteString(": ")
		} else if p.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		b.WriteString(p.where())
		b.WriteString("\n")
	}
	b.WriteString(configHelp)
	return b.String()
}

// Unwrap gives the problems, for errors.As(err, &fieldErr).
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// typeError is how BurntSushi/toml words a value of the wrong type; it has
// no error type for it.
var typeError = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError turns a decoding error into a *FieldError with the line and,
// when the error is about a value rather than the syntax, the key.
func decodeError(err error) *FieldError {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		if d, ok := strings.CutPrefix(perr.Message, "invalid duration: "); ok {
			// The decoder knows the key only as the last one it parsed,
			// which for a value is the value's own.
			return &FieldError{Field: perr.LastKey, Line: perr.Position.Line, Reason: durationReason(strings.Trim(d, `"`))}
		}
		return &FieldError{Line: perr.Position.Line, Reason: perr.Message}
	}
	if m := typeError.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{Field: m[2], Line: line, Reason: m[3]}
	}
	return &FieldError{Reason: err.Error()}
}

// durationReason says what is wrong with a duration written as v and how to
// write it, with v corrected when it is a bare number.
func durationReason(v string) string {
	fix := `"60s"`
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		fix = strconv.Quote(v + "s")
	}
	return fmt.Sprintf("invalid duration %q: a duration needs a unit, e.g. %s (units: ms, s, m, h; combined as \"1m30s\")", v, fix)
}

// unitlessDurations finds durations written as bare integers, which the
// decoder takes as nanoseconds: `timeout = 60` would be 60ns.
func unitlessDurations(data []byte, md toml.MetaData) []*FieldError {
	var problems []*FieldError
	for _, k := range md.Keys() {
		var table any
		switch {
		case len(k) == 2 && k[0] == "server":
			table = Server{}
		case len(k) == 3 && k[0] == "ssh":
			table = SSHTarget{}
		case len(k) == 3 && k[0] == "http":
			table = HTTPEndpoint{}
		default:
			continue
		}
		if !isDurationKey(table, k[len(k)-1]) || md.Type(k...) != "Integer" {
			continue
		}
		v := "60"
		if line := keyLine(data, k); line > 0 {
			if m := regexp.MustCompile(`=\s*([0-9_]+)`).FindSubmatch(lineText(data, line)); m != nil {
				v = string(m[1])
			}
		}
		problems = append(problems, &FieldError{Field: k.String(), Line: keyLine(data, k), Reason: durationReason(v) + ", in quotes"})
	}
	return problems
}

func isDurationKey(table any, key string) bool {
	rt := reflect.TypeOf(table)
	for i := range rt.NumField() {
		if f := rt.Field(i); f.Tag.Get("toml") == key {
			return f.Type == reflect.TypeFor[time.Duration]()
		}
	}
	return false
}

// lineText returns line n (1-based) of data.
func lineText(data []byte, n int) []byte {
	lines := bytes.SplitN(data, []byte("\n"), n+1)
	if n > len(lines) {
		return nil
	}
	return lines[n-1]
}

// inlineCredentialKeys are keys people write when they mean to paste a
// credential; each gets a pointer to the keyring instead of "unknown key".
var inlineCredentialKeys = map[string]string{
	"password": "password_secret", "passphrase": "passphrase_secret",
	"token": "token_secret", "key": "key_secret", "private_key": "key_secret",
	"secret": "token_secret", "api_key": "token_secret",
}

func undecodedError(data []byte, k toml.Key) *FieldError {
	fe := &FieldError{Field: k.String(), Line: keyLine(data, k), Reason: "unknown key"}
	if field, ok := inlineCredentialKeys[strings.ToLower(k[len(k)-1])]; ok {
		fe.Reason = fmt.Sprintf("credentials do not belong in the config file; store the value with `actiongw secret set NAME` and write %s = \"NAME\"", field)
	}
	return fe
}

// fieldLine finds the line of a FieldError's field: "server.key",
// "ssh.NAME[.key[[i]]]" or "http.NAME[.key[[i]]]", NAME possibly with dots.
// It is the key's line, else the line of the target's table header.
func fieldLine(data []byte, field string) int {
	kind, rest, ok := strings.Cut(field, ".")
	if !ok {
		return 0
	}
	if i := strings.IndexByte(rest, '['); i >= 0 {
		rest = rest[:i]
	}
	if kind == "server" || kind == "audit" {
		return keyLine(data, toml.Key{kind, rest})
	}
	if name, key, ok := cutLast(rest, "."); ok {
		if line := keyLine(data, toml.Key{kind, name, key}); line > 0 {
			return line
		}
	}
	return headerLine(data, kind+"."+rest)
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// headerLine finds the line of the header [table].
func headerLine(data []byte, table string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if h, ok := tableHeader(sc.Text()); ok && h == table {
			return n
		}
	}
	return 0
}

// tableHeader returns the table name of a "[table]" line, quotes removed.
func tableHeader(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "[") {
		return "", false
	}
	h := strings.Trim(line, "[] ")
	if i := strings.Index(h, "]"); i >= 0 {
		h = h[:i]
	}
	return strings.ReplaceAll(h, `"`, ""), true
}

// keyLine finds the line of key k: the first assignment of its last part
// after the header of its table. BurntSushi/toml keeps key positions
// private, so this reads the text.
func keyLine(data []byte, k toml.Key) int {
	table := strings.Join(k[:len(k)-1], ".")
	assign := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(k[len(k)-1]) + `"?\s*=`)
	inTable := table == ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if h, ok := tableHeader(line); ok {
			inTable = h == table
			continue
		}
		if inTable && assign.MatchString(line) {
			return n
		}
	}
	return 0
}

// FieldError says which field of the config is wrong and why.
type FieldError struct {
	// Field is the key path, e.g. "ssh.web1.port"; empty for a syntax
	// error, which belongs to a line rather than a key.
	Field string
	// Line is the line of the file (from 1); zero when unknown, as for a
	// Config built in code.
	Line   int
	Reason string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.where())
	}
	return e.where()
}

// where is the key and the reason.
func (e *FieldError) where() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Validate checks every field and returns all problems at once, each a
// *FieldError. It changes nothing: defaults come from Parse or
// SetDefaults.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	s := &c.Server
	if s.StateDir == "" {
		bad("server.state_dir", "must not be empty")
	}
	positive := []struct {
		name string
		v    int64
		min  int64
	}{
		{"server.max_frame_bytes", int64(s.MaxFrameBytes), 1024},
		{"server.result_bytes", int64(s.ResultBytes), 4096},
		{"server.max_concurrent_actions", int64(s.MaxConcurrentActions), 1},
		{"server.head_bytes", int64(s.HeadBytes), 0},
		{"server.tail_bytes", int64(s.TailBytes), 0},
		{"server.retain_head_bytes", s.RetainHeadBytes, 0},
		{"server.retain_tail_bytes", s.RetainTailBytes, 0},
		{"server.spool_max_bytes", s.SpoolMaxBytes, 0},
	}
	for _, p := range positive {
		if p.v < p.min {
			bad(p.name, "must be at least %d, got %d", p.min, p.v)
		}
	}
	if s.ResultBytes > s.MaxFrameBytes {
		bad("server.result_bytes", "must not exceed max_frame_bytes (%d), got %d", s.MaxFrameBytes, s.ResultBytes)
	}
	if s.SpoolTTL <= 0 {
		bad("server.spool_ttl", "must be positive, got %s", s.SpoolTTL)
	}
	if s.QueueWait <= 0 {
		bad("server.queue_wait", "must be positive, got %s", s.QueueWait)
	}
	if s.Wait < 0 {
		bad("server.wait", "must not be negative, got %s", s.Wait)
	}
	if s.MaxBackgroundActions < 0 {
		bad("server.max_background_actions", "must not be negative, got %d", s.MaxBackgroundActions)
	}
	if s.MaxConcurrentReads < 1 {
		bad("server.max_concurrent_reads", "must be at least 1, got %d", s.MaxConcurrentReads)
	}
	if s.AuditRotateBytes < 1<<20 {
		bad("server.audit_rotate_bytes", "must be at least 1 MiB, got %d", s.AuditRotateBytes)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		bad("server.log_level", "must be debug, info, warn or error, got %q", s.LogLevel)
	}
	errs = append(errs, c.Audit.validate()...)

	for _, name := range sortedKeys(c.SSH) {
		t, f := c.SSH[name], "ssh."+name
		if err := checkTargetName(name); err != nil {
			bad(f, "%v", err)
		}
		if _, dup := c.HTTP[name]; dup {
			bad(f, "the name is also used by [http.%s]; target names must be unique", name)
		}
		if t.Host == "" {
			bad(f+".host", "is required")
		}
		if t.Port < 1 || t.Port > 65535 {
			bad(f+".port", "must be 1-65535, got %d", t.Port)
		}
		if t.User == "" {
			bad(f+".user", "is required")
		}
		auths := 0
		for _, set := range []bool{t.KeySecret != "", t.PasswordSecret != "", t.Agent} {
			if set {
				auths++
			}
		}
		if auths != 1 {
			bad(f, "set exactly one of key_secret, password_secret or agent = true")
		}
		if t.PassphraseSecret != "" && t.KeySecret == "" {
			bad(f+".passphrase_secret", "needs key_secret")
		}
		if t.HostKey != "" && !strings.HasPrefix(t.HostKey, "SHA256:") {
			bad(f+".host_key", `must be a "SHA256:…" fingerprint as ssh-keygen -l prints it`)
		}
		if t.Jump != "" {
			if _, ok := c.SSH[t.Jump]; !ok {
				bad(f+".jump", "names no [ssh.%s] target", t.Jump)
			} else if err := c.jumpLoop(name); err != nil {
				bad(f+".jump", "%v", err)
			}
		}
		for i, p := range t.AllowCommands {
			if _, err := regexp.Compile(p); err != nil {
				bad(fmt.Sprintf("%s.allow_commands[%d]", f, i), "%v", err)
			}
		}
		for i, p := range t.DenyCommands {
			if _, err := regexp.Compile(p); err != nil {
				bad(fmt.Sprintf("%s.deny_commands[%d]", f, i), "%v", err)
			}
		}
		if t.Timeout <= 0 || t.Keepalive <= 0 {
			bad(f, "timeout and keepalive must be positive")
		}
		if t.Timeout > t.MaxTimeout {
			bad(f+".timeout", "must not exceed max_timeout (%s)", t.MaxTimeout)
		}
		if t.MaxSessions < 1 || t.MaxSessions > 64 {
			bad(f+".max_sessions", "must be 1-64, got %d", t.MaxSessions)
		}
		if t.MaxConnections < 1 || t.MaxConnections > 16 {
			bad(f+".max_connections", "must be 1-16, got %d", t.MaxConnections)
		}
		// sshd drops the whole connection for a request over its packet
		// limit (256 KiB); the quoted command must stay well under it.
		if t.MaxCommandBytes < 1 || t.MaxCommandBytes > 64<<10 {
			bad(f+".max_command_bytes", "must be 1-65536, got %d", t.MaxCommandBytes)
		}
		if len(t.Cwd) > MaxCwdBytes || strings.IndexByte(t.Cwd, 0) >= 0 {
			bad(f+".cwd", "must be at most %d bytes, with no NUL", MaxCwdBytes)
		}
		dirs := &policy.Dirs{Allow: t.AllowCwd}
		switch err := dirs.Validate(); {
		case err != nil:
			bad(f+".allow_cwd", "%v", err)
		case len(t.AllowCwd) > 0 && t.Cwd == "":
			bad(f+".allow_cwd", `needs cwd: the directory a command runs in when a call gives none (the login directory cannot be checked against allow_cwd); set cwd = "DIR" to one it allows`)
		case len(t.AllowCwd) > 0:
			var de *policy.DeniedError
			if _, err := dirs.Check(t.Cwd); errors.As(err, &de) {
				bad(f+".cwd", "must be a directory allow_cwd allows: %s", de.Reason)
			}
		}
		if len(t.Env) > MaxEnv {
			bad(f+".env", "must set at most %d variables, got %d", MaxEnv, len(t.Env))
		}
		for _, name := range sortedKeys(t.Env) {
			v := t.Env[name]
			switch {
			case !sshexec.SettableEnv(name):
				bad(f+".env."+name, "must be a shell variable name (%s)", sshexec.EnvNameRule)
			case len(v) > MaxEnvValueBytes || strings.IndexByte(v, 0) >= 0:
				bad(f+".env."+name, "must be at most %d bytes, with no NUL", MaxEnvValueBytes)
			}
		}
		for _, p := range t.AllowEnv {
			if _, err := path.Match(p, ""); err != nil {
				bad(f+".allow_env", "%q is not a glob: %v", p, err)
			}
		}
		if t.OutputLimit < 0 || t.MaxStdinBytes < 0 || t.MaxConcurrent < 0 {
			bad(f, "output_limit, max_stdin_bytes and max_concurrent must not be negative")
		}
		if err := (&policy.Paths{Allow: t.AllowPaths, Deny: t.DenyPaths}).Validate(); err != nil {
			bad(f, "%v", err)
		}
		if t.MaxUploadBytes < 1 || t.MaxDownloadBytes < 1 {
			bad(f, "max_upload_bytes and max_download_bytes must be at least 1")
		}
		switch t.StopMode {
		case "signal", "wrapper":
		default:
			bad(f+".stop_mode", `must be "signal" or "wrapper", got %q`, t.StopMode)
		}
		switch t.Approve {
		case ApproveNever, ApproveAlways:
		case ApproveUnlisted:
			if len(t.AllowCommands) == 0 {
				bad(f+".approve", `"unlisted" asks for the commands allow_commands does not list, and it lists none: list the commands that run without asking, or use approve = "always"`)
			}
		default:
			bad(f+".approve", `must be "never", "unlisted" or "always", got %q`, t.Approve)
		}
		switch {
		case t.HostKeyPolicy != "strict" && t.HostKeyPolicy != "ask":
			bad(f+".host_key_policy", `must be "strict" or "ask", got %q`, t.HostKeyPolicy)
		case t.HostKeyPolicy == "ask" && t.HostKey != "":
			bad(f+".host_key_policy", `"ask" trusts keys into known_hosts, and host_key pins one key instead: set one of them`)
		}
		switch {
		case t.SudoSecret != "" && !t.AllowSudo:
			bad(f+".sudo_secret", "is set but allow_sudo is not: set allow_sudo = true to let calls use sudo")
		case t.AllowSudo && t.PTY:
			bad(f+".allow_sudo", "cannot be used with pty = true: the terminal would echo the sudo password")
		}
		errs = append(errs, checkSecretNames(f, map[string]string{
			"key_secret": t.KeySecret, "passphrase_secret": t.PassphraseSecret, "password_secret": t.PasswordSecret,
			"sudo_secret": t.SudoSecret,
		})...)
		errs = append(errs, checkCertificate(f, t)...)
		errs = append(errs, checkNoInline(f, t.Description, t.Host, t.User)...)
	}

	if c.Approval.Timeout <= 0 {
		bad("approval.timeout", "must be more than zero, got %v", c.Approval.Timeout)
	}
	if c.Approval.Remember < 0 {
		bad("approval.remember", "must not be negative, got %v", c.Approval.Remember)
	}
	if s.MaxParallel < 1 {
		bad("server.max_parallel", "must be at least 1, got %d", s.MaxParallel)
	}
	for _, name := range sortedKeys(c.Group) {
		g, f := c.Group[name], "group."+name
		if err := checkTargetName(name); err != nil {
			bad(f, "%v", strings.Replace(err.Error(), "a target name", "a group name", 1))
		}
		if len(g.Targets) == 0 {
			bad(f+".targets", "must name at least one SSH target")
		} else if names, err := c.Targets(g.Targets); err != nil {
			bad(f+".targets", "%v", err)
		} else if len(names) > MaxGroupTargets {
			bad(f+".targets", "names %d targets; ssh_exec_many runs on at most %d", len(names), MaxGroupTargets)
		}
		errs = append(errs, checkNoInline(f, g.Description)...)
	}

	for _, name := range sortedKeys(c.HTTP) {
		e, f := c.HTTP[name], "http."+name
		if err := checkTargetName(name); err != nil {
			bad(f, "%v", err)
		}
		u, err := url.Parse(e.BaseURL)
		switch {
		case e.BaseURL == "":
			bad(f+".base_url", "is required")
		case err != nil:
			bad(f+".base_url", "is not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			bad(f+".base_url", "must start with https:// or http://")
		case u.Host == "":
			bad(f+".base_url", "has no host")
		case u.User != nil:
			bad(f+".base_url", "must not carry userinfo; use auth = \"basic\" with password_secret")
		case u.RawQuery != "" || u.Fragment != "":
			bad(f+".base_url", "must not carry a query or fragment; use auth = \"query\" for a credential parameter")
		}
		if len(e.Methods) == 0 {
			bad(f+".methods", "must name at least one method")
		}
		for _, m := range e.Methods {
			if !slices.Contains([]string{"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}, m) {
				bad(f+".methods", "unknown method %q", m)
			}
		}
		for _, m := range e.ApproveMethods {
			if !slices.Contains(e.Methods, m) {
				bad(f+".approve_methods", "%q is not one of the endpoint's methods %q", m, e.Methods)
			}
		}
		for i, p := range e.Paths {
			if !strings.HasPrefix(p, "/") {
				bad(fmt.Sprintf("%s.paths[%d]", f, i), "must start with /")
			}
		}
		want := map[string][]string{ // auth kind → fields it needs
			"none": nil, "bearer": {"token_secret"}, "basic": {"user", "password_secret"},
			"header": {"header", "token_secret"}, "query": {"param", "token_secret"},
			"oauth2_client_credentials": {"token_url", "client_id", "client_secret_secret"},
			"oauth2_refresh_token":      {"token_url", "client_id", "refresh_token_secret"},
		}
		optional := map[string][]string{ // auth kind → fields it may use
			"oauth2_client_credentials": {"scopes"}, "oauth2_refresh_token": {"client_secret_secret"},
		}
		need, ok := want[e.Auth]
		if !ok {
			bad(f+".auth", "must be none, bearer, basic, header, query, oauth2_client_credentials or oauth2_refresh_token, got %q", e.Auth)
		}
		have := map[string]string{"token_secret": e.TokenSecret, "user": e.User, "password_secret": e.PasswordSecret, "header": e.Header, "param": e.Param,
			"token_url": e.TokenURL, "client_id": e.ClientID, "client_secret_secret": e.ClientSecretSecret,
			"scopes": strings.Join(e.Scopes, " "), "refresh_token_secret": e.RefreshTokenSecret}
		for _, field := range sortedKeys(have) {
			if have[field] != "" && !slices.Contains(need, field) && !slices.Contains(optional[e.Auth], field) {
				bad(f+"."+field, "is not used by auth = %q", e.Auth)
			}
		}
		for _, field := range need {
			if have[field] == "" {
				bad(f+"."+field, "is required by auth = %q", e.Auth)
			}
		}
		if e.TokenURL != "" {
			if err := httpact.CheckTokenURL(e.TokenURL, e.AllowPrivate); err != nil {
				bad(f+".token_url", "%v", err)
			}
		}
		var pe *httpact.EndpointError
		if errors.As(httpact.CheckProxy(e.Proxy, e.UseEnvProxy, e.BaseURL, e.TokenURL, e.Auth), &pe) {
			bad(f+"."+pe.Field, "%s", pe.Reason)
		}
		switch e.FollowRedirects {
		case "none", "same-origin":
		default:
			bad(f+".follow_redirects", `must be "none" or "same-origin", got %q`, e.FollowRedirects)
		}
		if e.CAFile != "" {
			if _, err := httpact.LoadCAFile(e.CAFile); err != nil {
				bad(f+".ca_file", "%v", err)
			}
		}
		switch {
		case (e.ClientCert == "") != (e.ClientKeySecret == ""):
			bad(f, "client_cert and client_key_secret go together: set both (the certificate file and the keyring item of its key) or neither")
		case e.ClientCert == "":
		case u != nil && u.Scheme == "http":
			bad(f+".client_cert", "needs an https:// base_url: a client certificate is presented only over TLS")
		default:
			if err := httpact.CheckClientCertFile(e.ClientCert); err != nil {
				bad(f+".client_cert", "%v", err)
			}
		}
		if e.Timeout <= 0 {
			bad(f+".timeout", "must be positive")
		}
		if e.Timeout > e.MaxTimeout {
			bad(f+".timeout", "must not exceed max_timeout (%s)", e.MaxTimeout)
		}
		if e.MaxURLBytes < 1 || e.MaxHeaderBytes < 1 {
			bad(f, "max_url_bytes and max_header_bytes must be positive")
		}
		if e.MaxRequestBytes < 0 || e.DrainCap < 0 || e.MaxAttempts < 1 || e.MaxAttempts > 10 || e.MaxConcurrent < 0 {
			bad(f, "max_request_bytes and drain_cap must not be negative, max_attempts must be 1-10")
		}
		errs = append(errs, checkSecretNames(f, map[string]string{
			"token_secret": e.TokenSecret, "password_secret": e.PasswordSecret, "client_key_secret": e.ClientKeySecret,
			"client_secret_secret": e.ClientSecretSecret, "refresh_token_secret": e.RefreshTokenSecret,
		})...)
		errs = append(errs, checkNoInline(f, e.Description, e.BaseURL, e.User, e.Header, e.Param)...)
	}
	return errors.Join(errs...)
}

// validate checks the [audit] section.
func (a *Audit) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "audit." + field, Reason: fmt.Sprintf(format, args...)})
	}
	// At least the largest record, with room to spare.
	if a.SyslogQueueBytes < 1<<20 {
		bad("syslog_queue_bytes", "must be at least 1 MiB, got %d", a.SyslogQueueBytes)
	}
	tlsOnly := []struct{ field, v string }{{"syslog_ca_file", a.SyslogCAFile}, {"syslog_server_name", a.SyslogServerName}}
	if a.Syslog == "" {
		for _, f := range tlsOnly {
			if f.v != "" {
				bad(f.field, `is used only with syslog = "tls://host:port", which is not set`)
			}
		}
		return errs
	}
	_, useTLS, err := a.SyslogAddr()
	switch {
	case err != nil:
		bad("syslog", "%v", err)
	case !useTLS:
		for _, f := range tlsOnly {
			if f.v != "" {
				bad(f.field, "is used only with tls://; syslog = %q sends in the clear", a.Syslog)
			}
		}
	case a.SyslogCAFile != "":
		if _, err := httpact.LoadCAFile(a.SyslogCAFile); err != nil {
			bad("syslog_ca_file", "%v", err)
		}
	}
	return errs
}

func (c *Config) jumpLoop(start string) error {
	seen := map[string]bool{}
	for name := start; name != ""; name = c.SSH[name].Jump {
		if seen[name] {
			return fmt.Errorf("jump hosts form a loop through %q", name)
		}
		seen[name] = true
		if c.SSH[name] == nil {
			return nil
		}
	}
	return nil
}

var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkTargetName(name string) error {
	if !targetName.MatchString(name) {
		return errors.New("a target name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// checkSecretNames rejects secret fields that hold something other than the
// name of a keyring item.
func checkSecretNames(prefix string, fields map[string]string) []error {
	var errs []error
	for _, field := range sortedKeys(fields) {
		v := fields[field]
		if v == "" {
			continue
		}
		if looksInline(v) {
			errs = append(errs, &FieldError{Field: prefix + "." + field, Reason: "holds what looks like a credential; it must name a keyring item (store the value with `actiongw secret set NAME`)"})
			continue
		}
		if err := secrets.CheckUserName(v); err != nil {
			errs = append(errs, &FieldError{Field: prefix + "." + field, Reason: err.Error()})
		}
	}
	return errs
}

// checkNoInline rejects a PEM block or similar pasted into a plain field.
func checkNoInline(prefix string, values ...string) []error {
	for _, v := range values {
		if looksInline(v) {
			return []error{&FieldError{Field: prefix, Reason: "a value looks like an inline credential (a PEM block); credentials belong in the keyring (`actiongw secret set NAME`)"}}
		}
	}
	return nil
}

func looksInline(v string) bool {
	return strings.Contains(v, "-----BEGIN") || strings.Contains(v, "PRIVATE KEY")
}

// ProxyAddr returns the host and port of the proxy that a request to the
// endpoint's base URL goes through ("" for none), reading the environment
// for UseEnvProxy.
func (e *HTTPEndpoint) ProxyAddr() string {
	return httpact.ProxyFor(e.Proxy, e.UseEnvProxy, e.BaseURL)
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
	return secretNames(t.KeySecret, t.PassphraseSecret, t.PasswordSecret, t.SudoSecret, t.CertificateSecret)
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

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
