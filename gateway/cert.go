package gateway

import (
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

// certificateBytes returns a target's SSH user certificate: its file, read
// again in case it changed since the config was checked, or its keyring
// item; nil when it has none.
func certificateBytes(c *config.SSHTarget, values map[string]secrets.Value, errs map[string]error) ([]byte, error) {
	if c.Certificate == "" {
		return secretBytes(c.CertificateSecret, values, errs)
	}
	return sshexec.ReadCertificateFile(c.Certificate)
}
