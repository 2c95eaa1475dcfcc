package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// CA is an OpenSSH certificate authority made by the real ssh-keygen.
type CA struct {
	// PublicKey is the CA's public key in authorized_keys form, for
	// Options.TrustedUserCAKeys.
	PublicKey []byte

	dir, key string
	serial   int
}

// NewCA makes a new ed25519 CA with ssh-keygen in a temporary directory.
// Without ssh-keygen it ends t with testenv.Missing.
func NewCA(t testing.TB) *CA {
	t.Helper()
	testenv.Command(t, "ssh-keygen", "openssh-client")
	dir := t.TempDir()
	ca := &CA{dir: dir, key: filepath.Join(dir, "ca")}
	keygen(t, "-q", "-t", "ed25519", "-N", "", "-C", "actiongw-test-ca", "-f", ca.key)
	var err error
	if ca.PublicKey, err = os.ReadFile(ca.key + ".pub"); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Sign returns a user certificate for pub, in authorized_keys form (what
// ssh-keygen writes to KEY-cert.pub), signed with ssh-keygen -s. principals
// is ssh-keygen's -n (empty: none); validity its -V (empty: forever), e.g.
// "20200101:20200102" or "+1h".
func (ca *CA) Sign(t testing.TB, pub ssh.PublicKey, keyID, principals, validity string) []byte {
	t.Helper()
	var args []string
	if principals != "" {
		args = append(args, "-n", principals)
	}
	if validity != "" {
		args = append(args, "-V", validity)
	}
	return ca.sign(t, pub, keyID, args)
}

// SignHost returns a host certificate (ssh-keygen -h) for pub.
func (ca *CA) SignHost(t testing.TB, pub ssh.PublicKey, keyID, principals string) []byte {
	t.Helper()
	return ca.sign(t, pub, keyID, []string{"-h", "-n", principals})
}

func (ca *CA) sign(t testing.TB, pub ssh.PublicKey, keyID string, args []string) []byte {
	t.Helper()
	ca.serial++
	base := filepath.Join(ca.dir, "key"+strconv.Itoa(ca.serial))
	if err := os.WriteFile(base+".pub", ssh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"-q", "-s", ca.key, "-I", keyID, "-z", strconv.Itoa(ca.serial)}, args...)
	keygen(t, append(args, base+".pub")...)
	cert, err := os.ReadFile(base + "-cert.pub")
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func keygen(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(testenv.Command(t, "ssh-keygen", "openssh-client"), args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v: %s", args, err, out)
	}
}
