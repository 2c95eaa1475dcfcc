package gateway

import (
	"fmt"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/sshexec"
)

// proxyJump builds the hops that the ssh config's ProxyJump gave target
// t (configured as c), ending with the hop t connects through; nil when
// there are none. Every hop logs in with t's credentials and checks its
// host key against t's known_hosts (or under the hop's HostKeyAlias):
// nothing of the ssh config is a credential, and t's password is never
// offered to a hop.
func proxyJump(t *sshexec.Target, c *config.SSHTarget) *sshexec.Target {
	// A password would be shown to every hop; config refuses the
	// combination, and this keeps it out regardless.
	auth := t.Auth
	auth.Password, auth.PasswordSecret = nil, ""
	var prev *sshexec.Target
	for _, h := range c.ProxyJump {
		keepalive := h.Keepalive
		if keepalive == 0 {
			keepalive = t.Keepalive
		}
		prev = &sshexec.Target{
			Name: fmt.Sprintf("%s (jump host %s)", t.Name, h.Spec), Host: h.Host, Port: h.Port, User: h.User,
			KnownHostsPath: c.KnownHosts, HostKeyAlias: h.HostKeyAlias, ConnectTimeout: h.ConnectTimeout,
			MaxSessions: t.MaxSessions, Keepalive: keepalive, Auth: auth, AgentSocket: t.AgentSocket,
			Jump: prev,
		}
	}
	return prev
}
