package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	sshconfig "github.com/kevinburke/ssh_config"
)

// SSHHop is one hop of a ProxyJump chain read from the ssh config, in the
// order of connection: the first is dialled directly, each next one
// through the one before. A hop logs in with its target's credentials and
// checks its host key against its target's known_hosts.
type SSHHop struct {
	// Spec is the hop as ProxyJump wrote it ("admin@bastion:2222"), for
	// messages.
	Spec string
	Host string
	Port int
	User string
	// HostKeyAlias, ConnectTimeout and Keepalive come from the hop's own
	// Host entry; zero values mean none, none and the target's keepalive.
	HostKeyAlias   string
	ConnectTimeout time.Duration
	Keepalive      time.Duration
}

// sshConfigOff is the value of ssh_config that turns the ssh config off.
const sshConfigOff = "none"

// maxSSHConfigBytes bounds the ssh config file read; OpenSSH configs are a
// few KiB.
const maxSSHConfigBytes = 4 << 20

// maxHops bounds a ProxyJump chain, counting the hops that the first hop's
// own ProxyJump adds; as sshexec's jump depth.
const maxHops = 8

// sshConfig is a parsed OpenSSH client config.
type sshConfig struct {
	path string
	cfg  *sshconfig.Config
}

// readSSHConfig reads and parses the ssh config at path. The parser reads
// the files named by Include itself. Its errors never quote the files'
// text: a config may Include any file the user can read.
func readSSHConfig(path string) (*sshConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSSHConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSSHConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSSHConfigBytes)
	}
	cfg, err := decodeSSHConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &sshConfig{path: path, cfg: cfg}, nil
}

// decodeSSHConfig is ssh_config.DecodeBytes with its errors made safe to
// show, and its panics (it re-raises runtime errors) turned into errors.
func decodeSSHConfig(data []byte) (cfg *sshconfig.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, errors.New("the ssh config parser failed on it")
		}
	}()
	cfg, err = sshconfig.DecodeBytes(data)
	if err != nil {
		return nil, safeParseError(err.Error())
	}
	return cfg, nil
}

var (
	parsePos   = regexp.MustCompile(`^\((\d+), \d+\): `)
	includeErr = regexp.MustCompile(`^Error parsing Include directive: (?:(open|read) (/\S*): ([a-z ]+)$)?`)
)

// safeParseError rewords a parser error as its line and a fixed reason: the
// parser quotes the text it rejects, which may come from any file an
// Include names. Only a path and an errno, which are no file's content,
// are kept.
func safeParseError(msg string) error {
	where := ""
	if m := parsePos.FindStringSubmatch(msg); m != nil {
		where, msg = "line "+m[1]+": ", msg[len(m[0]):]
	}
	var why string
	switch m := includeErr.FindStringSubmatch(msg); {
	case m != nil && m[1] != "":
		why = fmt.Sprintf("Include: %s %s: %s", m[1], m[2], m[3])
	case m != nil:
		why = "an Include names a file that does not parse"
	case strings.Contains(msg, "max recurse depth exceeded"):
		why = "Include nested more than 5 deep (an Include loop?)"
	case strings.Contains(msg, "Match Exec"):
		why = "Match exec is not supported (it would run a command)"
	case strings.Contains(msg, "unsupported Match criterion"):
		why = "a Match criterion other than host or all (user, localuser, canonical, exec… are not supported)"
	case strings.Contains(msg, "Match"):
		why = "a Match line without its criterion or pattern"
	case strings.Contains(msg, "host pattern"):
		why = "a Host pattern that does not parse"
	default:
		why = "syntax error"
	}
	return errors.New(where + why)
}

// unmatchable is a name no Host pattern but a match-everything one ("*")
// matches: a host is an alias when its values differ from this name's.
const unmatchable = "\x00"

// hostEntry is what the ssh config says of one Host alias.
type hostEntry struct {
	hostName, user, proxyJump, hostKeyAlias, identityAgent string
	port                                                   int
	connectTimeout, keepalive                              time.Duration
	// proxyCommand is true when the entry sets a ProxyCommand, which
	// actiongw refuses (errProxyCommand) unless the target's jump replaces it.
	proxyCommand bool
}

var errProxyCommand = errors.New("ProxyCommand is not supported: it runs a local command, and actiongw runs none; " +
	"use ProxyJump in the ssh config, or jump = \"TARGET\" in the target")

// aliasKeys are the keywords read for an alias.
var aliasKeys = []string{"HostName", "Port", "User", "ProxyJump", "ProxyCommand", "HostKeyAlias", "ConnectTimeout", "ServerAliveInterval", "IdentityAgent"}

// lookup returns the entry of alias and whether alias is one: a Host or
// Match entry other than those that match every name gives it a value
// actiongw reads. Values of "Host *" entries then apply too, first value
// first, as in ssh.
func (s *sshConfig) lookup(alias string) (*hostEntry, bool, error) {
	vals := map[string]string{}
	isAlias := false
	for _, k := range aliasKeys {
		v, err := s.cfg.Get(alias, k)
		if err != nil {
			return nil, false, errors.New("its entry does not parse")
		}
		all, _ := s.cfg.Get(unmatchable, k)
		isAlias = isAlias || v != all
		vals[k] = v
	}
	if !isAlias {
		return nil, false, nil
	}
	e := &hostEntry{user: vals["User"], hostKeyAlias: vals["HostKeyAlias"], identityAgent: vals["IdentityAgent"]}
	if pc := vals["ProxyCommand"]; pc != "" && !strings.EqualFold(pc, "none") {
		e.proxyCommand = true
	}
	var err error
	if e.hostName, err = expandTokens(vals["HostName"], "HostName", map[byte]string{'h': alias}); err != nil {
		return nil, true, err
	}
	if strings.EqualFold(vals["ProxyJump"], "none") {
		vals["ProxyJump"] = ""
	}
	e.proxyJump = vals["ProxyJump"]
	if v := vals["Port"]; v != "" {
		if e.port, err = strconv.Atoi(v); err != nil || e.port < 1 || e.port > 65535 {
			return nil, true, fmt.Errorf("Port must be 1-65535, got %q", v)
		}
	}
	if e.connectTimeout, err = seconds("ConnectTimeout", vals["ConnectTimeout"]); err != nil {
		return nil, true, err
	}
	if e.keepalive, err = seconds("ServerAliveInterval", vals["ServerAliveInterval"]); err != nil {
		return nil, true, err
	}
	return e, true, nil
}

// seconds parses a whole number of seconds; "" and "0" are zero.
func seconds(key, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s must be a whole number of seconds, got %q", key, v)
	}
	return time.Duration(n) * time.Second, nil
}

// expandTokens replaces OpenSSH's %-tokens in v from tokens, and %% by %;
// any other token is an error naming key.
func expandTokens(v, key string, tokens map[byte]string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		i++
		if i == len(v) {
			return "", fmt.Errorf("%s ends in a lone %%", key)
		}
		if v[i] == '%' {
			b.WriteByte('%')
		} else if s, ok := tokens[v[i]]; ok {
			b.WriteString(s)
		} else {
			return "", fmt.Errorf("%s uses %%%c, which actiongw does not expand", key, v[i])
		}
	}
	return b.String(), nil
}

// agentSocket turns IdentityAgent into a socket path: "" for
// $SSH_AUTH_SOCK (no IdentityAgent, or "SSH_AUTH_SOCK"), "none" for no
// agent.
func agentSocket(v string) (string, error) {
	switch {
	case v == "" || v == "SSH_AUTH_SOCK":
		return "", nil
	case strings.EqualFold(v, "none"):
		return sshConfigOff, nil
	case strings.HasPrefix(v, "$"):
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(v, "$"), "{"), "}")
		if os.Getenv(name) == "" {
			return "", fmt.Errorf("IdentityAgent names $%s, which is not set in actiongw's environment", name)
		}
		return os.Getenv(name), nil
	}
	home, _ := os.UserHomeDir()
	v, err := expandTokens(expandHome(v), "IdentityAgent", map[byte]string{'d': home, 'u': localUser()})
	if err != nil {
		return "", err
	}
	return v, nil
}

// localUser is the name ssh logs in with when nothing names a user.
func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// hop is one parsed ProxyJump element.
type hop struct {
	spec, user, host string
	port             int
}

// parseProxyJump splits "[user@]host[:port],…" (also ssh://[user@]host[:port]
// and [v6]:port) into hops.
func parseProxyJump(v string) ([]hop, error) {
	var hops []hop
	for spec := range strings.SplitSeq(v, ",") {
		spec = strings.TrimSpace(spec)
		s := strings.TrimPrefix(spec, "ssh://")
		h := hop{spec: spec}
		if i := strings.LastIndex(s, "@"); i >= 0 {
			h.user, s = s[:i], s[i+1:]
		}
		h.host = s
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			h.host = s[1 : len(s)-1]
		} else if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
			host, port, err := net.SplitHostPort(s)
			if err != nil {
				return nil, fmt.Errorf("ProxyJump hop %q: %v", spec, err)
			}
			h.host = host
			if h.port, err = strconv.Atoi(port); err != nil || h.port < 1 || h.port > 65535 {
				return nil, fmt.Errorf("ProxyJump hop %q: port must be 1-65535", spec)
			}
		}
		if h.host == "" || strings.ContainsAny(h.host, " /") || (spec != s && strings.Contains(s, "/")) {
			return nil, fmt.Errorf("ProxyJump hop %q: want [user@]host[:port]", spec)
		}
		hops = append(hops, h)
	}
	return hops, nil
}

// jumpChain resolves a ProxyJump value into hops: each hop's own Host
// entry gives its HostName, Port, User, HostKeyAlias, ConnectTimeout and
// ServerAliveInterval (the hop's own user@ and :port win), and the first
// hop's own ProxyJump comes before it, as ssh does. seen holds the hops
// on the way, to find loops.
func (s *sshConfig) jumpChain(v string, seen map[string]bool) ([]SSHHop, error) {
	parsed, err := parseProxyJump(v)
	if err != nil {
		return nil, err
	}
	var chain []SSHHop
	for i, h := range parsed {
		if seen[h.host] {
			return nil, fmt.Errorf("ProxyJump loops through %q", h.host)
		}
		out := SSHHop{Spec: h.spec, Host: h.host, Port: h.port, User: h.user}
		e, isAlias, err := s.lookup(h.host)
		if err != nil {
			return nil, fmt.Errorf("ProxyJump hop %q: %w", h.spec, err)
		}
		if isAlias {
			if e.proxyCommand {
				return nil, fmt.Errorf("ProxyJump hop %q: %w", h.spec, errProxyCommand)
			}
			if e.hostName != "" {
				out.Host = e.hostName
			}
			if out.Port == 0 {
				out.Port = e.port
			}
			if out.User == "" {
				out.User = e.user
			}
			out.HostKeyAlias, out.ConnectTimeout, out.Keepalive = e.hostKeyAlias, e.connectTimeout, e.keepalive
			if i == 0 && e.proxyJump != "" {
				seen[h.host] = true
				before, err := s.jumpChain(e.proxyJump, seen)
				delete(seen, h.host)
				if err != nil {
					return nil, err
				}
				chain = append(chain, before...)
			}
		}
		if out.Port == 0 {
			out.Port = 22
		}
		if out.User == "" {
			out.User = localUser()
		}
		chain = append(chain, out)
	}
	if len(chain) > maxHops {
		return nil, fmt.Errorf("ProxyJump chain longer than %d hops", maxHops)
	}
	return chain, nil
}

// resolveSSHConfig applies the ssh config to every target whose host is a
// Host alias in it (see sshConfig.lookup). A value the target sets itself
// wins: set reports whether the TOML file set a target's key. A missing
// ssh config is none when it is the default one, an error when the file
// named another.
func (c *Config) resolveSSHConfig(set func(target, key string) bool) []*FieldError {
	path := c.Server.SSHConfig
	if path == sshConfigOff || len(c.SSH) == 0 {
		return nil
	}
	isDefault := path == Default().Server.SSHConfig
	path = expandHome(path)
	sc, err := readSSHConfig(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && isDefault:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return []*FieldError{{Field: "server.ssh_config", Reason: fmt.Sprintf("%s does not exist; name an OpenSSH client config, or set ssh_config = %q", path, sshConfigOff)}}
	case err != nil && isDefault:
		// Not asked for by name: a line the parser cannot take must not
		// keep a config that names no alias from loading.
		c.Warnings = append(c.Warnings, fmt.Sprintf("the ssh config was not read, so no target's host is taken as a Host alias of it: %v; "+
			"fix it, or set ssh_config = %q in [server] to not read it", err, sshConfigOff))
		return nil
	case err != nil:
		return []*FieldError{{Field: "server.ssh_config", Reason: fmt.Sprintf("ssh config %v; fix it, or set ssh_config = %q in [server] to not read it", err, sshConfigOff)}}
	}
	var problems []*FieldError
	for _, name := range slices.Sorted(maps.Keys(c.SSH)) {
		t := c.SSH[name]
		if t == nil || t.Host == "" {
			continue
		}
		alias := t.Host
		if err := sc.apply(name, t, set); err != nil {
			problems = append(problems, &FieldError{Field: "ssh." + name + ".host",
				Reason: fmt.Sprintf("target %q: Host alias %q in ssh config %s: %v", name, alias, sc.path, err)})
		}
	}
	return problems
}

// apply sets t's fields from the entry of its host, when that is an alias.
func (s *sshConfig) apply(name string, t *SSHTarget, set func(target, key string) bool) error {
	alias := t.Host
	e, isAlias, err := s.lookup(alias)
	if err != nil || !isAlias {
		return err
	}
	if e.proxyCommand && t.Jump == "" {
		return errProxyCommand
	}
	if e.hostName != "" {
		t.Host = e.hostName
	}
	if e.port != 0 && !set(name, "port") {
		t.Port = e.port
	}
	if t.User == "" {
		t.User = e.user
		if t.User == "" {
			t.User = localUser()
		}
	}
	if e.keepalive > 0 && !set(name, "keepalive") {
		t.Keepalive = e.keepalive
	}
	t.HostKeyAlias, t.ConnectTimeout = e.hostKeyAlias, e.connectTimeout
	if t.Agent {
		if t.IdentityAgent, err = agentSocket(e.identityAgent); err != nil {
			return err
		}
		if t.IdentityAgent == sshConfigOff {
			return errors.New("IdentityAgent none turns off the agent that agent = true logs in with; remove it from the entry, or use key_secret")
		}
	}
	if t.Jump == "" && e.proxyJump != "" {
		if t.PasswordSecret != "" {
			return errors.New("its ProxyJump hops would log in with the target's password, which only the target may see; use key_secret or agent = true, or a jump target")
		}
		if t.ProxyJump, err = s.jumpChain(e.proxyJump, map[string]bool{alias: true}); err != nil {
			return err
		}
	}
	return nil
}
