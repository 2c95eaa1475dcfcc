package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// validateSSH checks the target [ssh.NAME]. Its problems come in the
// order of the three parts.
func (c *Config) validateSSH(p *problems, name string) {
	t, f := c.SSH[name], "ssh."+name
	c.validateSSHLogin(p, name, f, t)
	validateSSHCommands(p, f, t)
	validateSSHOptions(p, f, t)
}

// validateSSHLogin checks where the target is and how it logs in: its
// name, host, port and user, its credential, its host key and its jump
// host. f is "ssh.NAME".
func (c *Config) validateSSHLogin(p *problems, name, f string, t *SSHTarget) {
	if err := checkTargetName(name); err != nil {
		p.bad(f, "%v", err)
	}
	if _, dup := c.HTTP[name]; dup {
		p.bad(f, "the name is also used by [http.%s]; target names must be unique", name)
	}
	if t.Host == "" {
		p.bad(f+".host", "is required")
	}
	if t.Port < 1 || t.Port > 65535 {
		p.bad(f+".port", "must be 1-65535, got %d", t.Port)
	}
	if t.User == "" {
		p.bad(f+".user", "is required")
	}
	auths := 0
	for _, set := range []bool{t.KeySecret != "", t.PasswordSecret != "", t.Agent, t.CASecret != ""} {
		if set {
			auths++
		}
	}
	if auths != 1 {
		p.bad(f, "set exactly one of key_secret, password_secret, agent = true or ca_secret")
	}
	c.validateCA(p, name, f, t)
	if t.PassphraseSecret != "" && t.KeySecret == "" {
		p.bad(f+".passphrase_secret", "needs key_secret")
	}
	if t.HostKey != "" && !strings.HasPrefix(t.HostKey, "SHA256:") {
		p.bad(f+".host_key", `must be a "SHA256:…" fingerprint as ssh-keygen -l prints it`)
	}
	if t.Jump != "" {
		if _, ok := c.SSH[t.Jump]; !ok {
			p.bad(f+".jump", "names no [ssh.%s] target", t.Jump)
		} else if err := c.jumpLoop(name); err != nil {
			p.bad(f+".jump", "%v", err)
		}
	}
}

// validateSSHCommands checks what a command may be and how it runs: the
// patterns, the timeouts, the sessions and connections, the size of a
// command, its directory and environment, and the limits of its output
// and stdin.
func validateSSHCommands(p *problems, f string, t *SSHTarget) {
	for i, pat := range t.AllowCommands {
		if _, err := regexp.Compile(pat); err != nil {
			p.bad(fmt.Sprintf("%s.allow_commands[%d]", f, i), "%v", err)
		}
	}
	for i, pat := range t.DenyCommands {
		if _, err := regexp.Compile(pat); err != nil {
			p.bad(fmt.Sprintf("%s.deny_commands[%d]", f, i), "%v", err)
		}
	}
	if t.Timeout <= 0 || t.Keepalive <= 0 {
		p.bad(f, "timeout and keepalive must be positive")
	}
	if t.Timeout > t.MaxTimeout {
		p.bad(f+".timeout", "must not exceed max_timeout (%s)", t.MaxTimeout)
	}
	if t.MaxSessions < 1 || t.MaxSessions > 64 {
		p.bad(f+".max_sessions", "must be 1-64, got %d", t.MaxSessions)
	}
	if t.MaxConnections < 1 || t.MaxConnections > 16 {
		p.bad(f+".max_connections", "must be 1-16, got %d", t.MaxConnections)
	}
	// sshd drops the whole connection for a request over its packet
	// limit (256 KiB); the quoted command must stay well under it.
	if t.MaxCommandBytes < 1 || t.MaxCommandBytes > 64<<10 {
		p.bad(f+".max_command_bytes", "must be 1-65536, got %d", t.MaxCommandBytes)
	}
	if len(t.Cwd) > MaxCwdBytes || strings.IndexByte(t.Cwd, 0) >= 0 {
		p.bad(f+".cwd", "must be at most %d bytes, with no NUL", MaxCwdBytes)
	}
	dirs := &policy.Dirs{Allow: t.AllowCwd}
	switch err := dirs.Validate(); {
	case err != nil:
		p.bad(f+".allow_cwd", "%v", err)
	case len(t.AllowCwd) > 0 && t.Cwd == "":
		p.bad(f+".allow_cwd", `needs cwd: the directory a command runs in when a call gives none (the login directory cannot be checked against allow_cwd); set cwd = "DIR" to one it allows`)
	case len(t.AllowCwd) > 0:
		var de *policy.DeniedError
		if _, err := dirs.Check(t.Cwd); errors.As(err, &de) {
			p.bad(f+".cwd", "must be a directory allow_cwd allows: %s", de.Reason)
		}
	}
	if len(t.Env) > MaxEnv {
		p.bad(f+".env", "must set at most %d variables, got %d", MaxEnv, len(t.Env))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Env)) {
		v := t.Env[name]
		switch {
		case !sshexec.SettableEnv(name):
			p.bad(f+".env."+name, "must be a shell variable name (%s)", sshexec.EnvNameRule)
		case len(v) > MaxEnvValueBytes || strings.IndexByte(v, 0) >= 0:
			p.bad(f+".env."+name, "must be at most %d bytes, with no NUL", MaxEnvValueBytes)
		}
	}
	for _, pat := range t.AllowEnv {
		if _, err := path.Match(pat, ""); err != nil {
			p.bad(f+".allow_env", "%q is not a glob: %v", pat, err)
		}
	}
	if t.OutputLimit < 0 || t.MaxStdinBytes < 0 || t.MaxConcurrent < 0 {
		p.bad(f, "output_limit, max_stdin_bytes and max_concurrent must not be negative")
	}
}

// validateSSHOptions checks the rest: file transfers, the stop mode,
// approval, the host-key policy and sudo, then the keyring names, the
// certificate and what looks like an inline credential.
func validateSSHOptions(p *problems, f string, t *SSHTarget) {
	if err := (&policy.Paths{Allow: t.AllowPaths, Deny: t.DenyPaths}).Validate(); err != nil {
		p.bad(f, "%v", err)
	}
	if t.MaxUploadBytes < 1 || t.MaxDownloadBytes < 1 {
		p.bad(f, "max_upload_bytes and max_download_bytes must be at least 1")
	}
	switch t.StopMode {
	case "signal", "wrapper":
	default:
		p.bad(f+".stop_mode", `must be "signal" or "wrapper", got %q`, t.StopMode)
	}
	switch t.Approve {
	case ApproveNever, ApproveAlways:
	case ApproveUnlisted:
		if len(t.AllowCommands) == 0 {
			p.bad(f+".approve", `"unlisted" asks for the commands allow_commands does not list, and it lists none: list the commands that run without asking, or use approve = "always"`)
		}
	default:
		p.bad(f+".approve", `must be "never", "unlisted" or "always", got %q`, t.Approve)
	}
	switch {
	case t.HostKeyPolicy != "strict" && t.HostKeyPolicy != "ask":
		p.bad(f+".host_key_policy", `must be "strict" or "ask", got %q`, t.HostKeyPolicy)
	case t.HostKeyPolicy == "ask" && t.HostKey != "":
		p.bad(f+".host_key_policy", `"ask" trusts keys into known_hosts, and host_key pins one key instead: set one of them`)
	}
	switch {
	case t.SudoSecret != "" && !t.AllowSudo:
		p.bad(f+".sudo_secret", "is set but allow_sudo is not: set allow_sudo = true to let calls use sudo")
	case t.AllowSudo && t.PTY:
		p.bad(f+".allow_sudo", "cannot be used with pty = true: the terminal would echo the sudo password")
	}
	p.add(checkSecretNames(f, map[string]string{
		"key_secret": t.KeySecret, "passphrase_secret": t.PassphraseSecret, "password_secret": t.PasswordSecret,
		"sudo_secret": t.SudoSecret, "ca_secret": t.CASecret,
	})...)
	for i, name := range t.AllowSecretInput {
		p.add(checkSecretNames(f, map[string]string{fmt.Sprintf("allow_secret_input[%d]", i): name})...)
	}
	switch {
	case len(t.AllowSecretInput) > 0 && !t.AllowSessions:
		p.bad(f+".allow_secret_input", "is set but allow_sessions is not: secrets are typed into terminal sessions only")
	case t.MaxTerminalSessions < 1:
		p.bad(f+".max_terminal_sessions", "must be at least 1")
	case t.SessionIdleTimeout < time.Second:
		p.bad(f+".session_idle_timeout", "must be at least 1s")
	}
	p.add(checkCertificate(f, t)...)
	p.add(checkNoInline(f, t.Description, t.Host, t.User)...)
}

// validateCA checks the options of a CA target (ca_secret): the validity
// of its certificates, their source-address, its SFTP server; and that no
// target jumps through it: its certificates permit no port forwarding.
func (c *Config) validateCA(p *problems, name, f string, t *SSHTarget) {
	if t.CASecret == "" {
		if t.CertSourceAddress != "" {
			p.bad(f+".cert_source_address", "needs ca_secret: it is an option of the certificates the gateway signs")
		}
		return
	}
	if t.Certificate != "" || t.CertificateSecret != "" {
		p.bad(f+".ca_secret", "cannot be used with certificate or certificate_secret: the gateway signs the certificate of each action itself")
	}
	if t.CertTTL < 10*time.Second || t.CertTTL > time.Hour {
		p.bad(f+".cert_ttl", "must be 10s-1h, got %s (a certificate only has to last until its login)", t.CertTTL)
	}
	for _, a := range strings.Split(t.CertSourceAddress, ",") {
		if t.CertSourceAddress == "" {
			break
		}
		if _, err := netip.ParsePrefix(a); err != nil {
			if _, err := netip.ParseAddr(a); err != nil {
				p.bad(f+".cert_source_address", "%q is no IP address or CIDR range (give them comma separated, no spaces)", a)
			}
		}
	}
	if t.SFTPServer != "internal-sftp" && !path.IsAbs(t.SFTPServer) {
		p.bad(f+".sftp_server", `must be "internal-sftp" or the absolute path of the host's sftp-server (as sshd_config's Subsystem sftp line says), got %q`, t.SFTPServer)
	}
	for _, other := range slices.Sorted(maps.Keys(c.SSH)) {
		if c.SSH[other].Jump == name {
			p.bad("ssh."+other+".jump", "names %q, a CA target (ca_secret), whose certificates permit no port forwarding: jump through a target with a key", name)
		}
	}
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
