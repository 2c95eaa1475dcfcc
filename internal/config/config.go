package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
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
	// MaxTerminalSessions bounds the terminal sessions (ssh_session_start)
	// open at once on all targets; each is also a background action.
	MaxTerminalSessions int `toml:"max_terminal_sessions" default:"4"`
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
	// SpoolTTL and SpoolMaxBytes evict finished actions from the spool,
	// the oldest first; the newest 16 (or max_concurrent_actions, if more)
	// stay past SpoolMaxBytes, so a handle just returned can be read.
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
	// Via is where a question goes: ViaClient (MCP elicitation at the
	// client), ViaConsole (only the person's console, `actiongw console`)
	// or ViaEither (both: the first answer wins, the other is withdrawn).
	// Unless it is ViaClient, a client that cannot ask has its question
	// go to the console instead of being refused.
	Via string `toml:"via" default:"client"`
}

// The places an approval question can go ([approval] via).
const (
	ViaClient  = "client"
	ViaConsole = "console"
	ViaEither  = "either"
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

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}
