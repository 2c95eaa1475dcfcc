package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

func TestCertificate(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ca := sshtest.NewCA(t)
	key, signer := sshtest.NewKey(t)
	shadow := "root:$y$j9T$abcdefghijklmnopqrstuv$0123456789abcdefghijklmnopqrstuvwxyzABCDE:19000:0:99999:7:::\n"
	files := map[string][]byte{
		"id-cert.pub":   ca.Sign(t, signer.PublicKey(), "ci", "deploy", ""),
		"old-cert.pub":  ca.Sign(t, signer.PublicKey(), "old", "deploy", "20200101:20200102"),
		"host-cert.pub": ca.SignHost(t, signer.PublicKey(), "host", "box"),
		"id":            key,
		"shadow":        []byte(shadow),
		"big":           []byte(strings.Repeat("A", 70<<10)),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(home, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	const base = "[ssh.box]\nhost = \"box\"\nuser = \"deploy\"\n"
	for _, tc := range []struct {
		name, toml string
		want       string // "" for success
	}{
		{"file under ~", `key_secret = "k"` + "\ncertificate = \"~/id-cert.pub\"", ""},
		{"keyring item", `key_secret = "k"` + "\ncertificate_secret = \"box-cert\"", ""},
		{"with the agent", "agent = true\ncertificate = \"~/id-cert.pub\"", ""},
		// Expiry is reported when the target is built, not as a
		// config that no longer loads.
		{"expired", `key_secret = "k"` + "\ncertificate = \"~/old-cert.pub\"", ""},
		{"both", `key_secret = "k"` + "\ncertificate = \"~/id-cert.pub\"\ncertificate_secret = \"box-cert\"",
			"ssh.box: set at most one of certificate or certificate_secret"},
		{"no key", `password_secret = "pw"` + "\ncertificate_secret = \"box-cert\"",
			"ssh.box.certificate_secret: needs the certificate's private key"},
		{"missing file", `key_secret = "k"` + "\ncertificate = \"~/nope-cert.pub\"",
			"line 5: ssh.box.certificate: cannot read certificate file " + filepath.Join(home, "nope-cert.pub")},
		{"host certificate", `key_secret = "k"` + "\ncertificate = \"~/host-cert.pub\"", "is a host certificate"},
		{"private key file", `key_secret = "k"` + "\ncertificate = \"~/id\"",
			"certificate file " + filepath.Join(home, "id") + " holds a private key, not a certificate"},
		{"shadow-like file", `key_secret = "k"` + "\ncertificate = \"~/shadow\"", "is not an OpenSSH certificate"},
		{"directory", `key_secret = "k"` + "\ncertificate = \"~/dir\"", "is not a regular file"},
		{"device", `key_secret = "k"` + "\ncertificate = \"/dev/zero\"", "is not a regular file"},
		{"huge file", `key_secret = "k"` + "\ncertificate = \"~/big\"", "larger than 64 KiB"},
		{"inline key", `key_secret = "k"` + "\ncertificate = \"-----BEGIN OPENSSH PRIVATE KEY-----\"", "must be the path of a *-cert.pub file"},
		{"bad item name", `key_secret = "k"` + "\ncertificate_secret = \"a b\"", "ssh.box.certificate_secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(base + tc.toml + "\n"))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse = %v; want no error", err)
				}
				if c := cfg.SSH["box"].Certificate; c != "" && !strings.HasPrefix(c, home+"/") {
					t.Errorf("certificate = %q; want ~ expanded to %s", c, home)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tc.want)
			}
			for _, quoted := range []string{string(key[40:70]), shadow[:12], "AAAAAAAA"} {
				if strings.Contains(err.Error(), quoted) {
					t.Fatalf("Parse error %q quotes the file", err)
				}
			}
		})
	}
	cfg, err := Parse([]byte(base + "key_secret = \"k\"\ncertificate_secret = \"box-cert\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(cfg.SecretNames(), ","), "box-cert,k"; got != want {
		t.Errorf("SecretNames() = %s; want %s", got, want)
	}
}
