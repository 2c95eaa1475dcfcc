package sshexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// caServer is a real sshd that trusts a CA made by NewCA, with an
// AuthorizedPrincipalsFile and a KRL (RevokedKeys), where the login user
// can log in with nothing else: no authorized key, no password.
type caServer struct {
	*sshtest.Server
	ca         ssh.Signer
	caPublic   []byte
	principals string // the login user's AuthorizedPrincipalsFile
	krl        string
}

func startCAServer(t testing.TB) *caServer {
	t.Helper()
	priv, pub, err := NewCA("actiongw-ca-test")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA("test", "test-ca", priv)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sshtest-ca-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	cs := &caServer{ca: ca, caPublic: pub, krl: filepath.Join(dir, "revoked.krl")}
	cs.revoke(t) // an empty KRL: sshd refuses every key when the file cannot be read
	principals := filepath.Join(dir, "principals")
	cs.Server = sshtest.Start(t, sshtest.Options{TrustedUserCAKeys: pub, Config: []string{
		"AuthorizedPrincipalsFile " + principals,
		"RevokedKeys " + cs.krl,
		"Match all",
		"AuthorizedKeysFile none",
		"PasswordAuthentication no",
	}})
	cs.principals = principals
	cs.allow(t, cs.User)
	return cs
}

// allow makes principal the one the login user's AuthorizedPrincipalsFile
// lists; sshd reads it at each login.
func (cs *caServer) allow(t testing.TB, principal string) {
	t.Helper()
	if err := os.WriteFile(cs.principals, []byte(principal+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// revoke writes a KRL that revokes serials of certificates of the CA;
// sshd reads it at each login.
func (cs *caServer) revoke(t testing.TB, serials ...uint64) {
	t.Helper()
	keygen := testenv.Command(t, "ssh-keygen", "openssh-client")
	dir := t.TempDir()
	caPub := filepath.Join(dir, "ca.pub")
	spec := filepath.Join(dir, "spec")
	var b strings.Builder
	for _, s := range serials {
		b.WriteString("serial: " + strconv.FormatUint(s, 10) + "\n")
	}
	if err := os.WriteFile(caPub, cs.caPublic, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := cs.krl + ".new"
	if out, err := exec.Command(keygen, "-q", "-k", "-f", tmp, "-s", caPub, spec).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -k: %v: %s", err, out)
	}
	os.Chmod(tmp, 0o644)
	if err := os.Rename(tmp, cs.krl); err != nil {
		t.Fatal(err)
	}
}

// target is a CA target on cs.
func (cs *caServer) target() *Target {
	return &Target{Name: "ca-test", Host: cs.Host, Port: cs.Port, User: cs.User, KnownHostsPath: cs.KnownHosts,
		Auth: Auth{CA: cs.ca, CASecret: "test-ca"}, MaxSessions: 10, Keepalive: 15 * time.Second, CertTTL: 2 * time.Minute}
}

// certs records the certificates a pool signs.
type certs struct {
	mu   sync.Mutex
	list []*ssh.Certificate
}

func (c *certs) add(cert *ssh.Certificate) { c.mu.Lock(); c.list = append(c.list, cert); c.mu.Unlock() }

func (c *certs) all() []*ssh.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*ssh.Certificate(nil), c.list...)
}

// runCA runs command on tg under a certificate with keyID and serial.
func runCA(t *testing.T, p *Pool, tg *Target, keyID string, serial uint64, req Request) (output, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := p.Acquire(ctx, tg, forever)
	if err != nil {
		return output{}, err
	}
	l.Certify(keyID, serial)
	var stdout, stderr syncbuf.Buffer
	req.Stdout, req.Stderr = &stdout, &stderr
	res, err := l.Run(ctx, req)
	return output{res, stdout.String(), stderr.String()}, err
}

// TestCATarget runs commands on a CA target against a real sshd that
// accepts nothing but the CA's certificates: each one is signed for the
// one command line sent, names its key id in sshd's log, and allows
// nothing else.
func TestCATarget(t *testing.T) {
	cs := startCAServer(t)
	p := newPool(t)
	var signed certs
	p.signed = signed.add
	tg := cs.target()

	out, err := runCA(t, p, tg, "act-7f3a9c", 4242, Request{Command: "id -un; echo err >&2"})
	if err != nil || out.res.Status != StatusExited || strings.TrimSpace(out.stdout) != cs.User || out.stderr != "err\n" {
		t.Fatalf("got %+v, %v; want %s on stdout and err on stderr", out, err, cs.User)
	}
	list := signed.all()
	if len(list) != 1 {
		t.Fatalf("signed %d certificates; want 1", len(list))
	}
	c := list[0]
	now := time.Now()
	switch {
	case c.KeyId != "act-7f3a9c" || c.Serial != 4242:
		t.Errorf("key id %q, serial %d; want act-7f3a9c, 4242", c.KeyId, c.Serial)
	case len(c.ValidPrincipals) != 1 || c.ValidPrincipals[0] != cs.User:
		t.Errorf("principals %q; want only %q", c.ValidPrincipals, cs.User)
	case len(c.Extensions) != 0:
		t.Errorf("extensions %v; want none (no pty, no forwarding of any kind)", c.Extensions)
	case len(c.CriticalOptions) != 1 || !strings.Contains(c.CriticalOptions["force-command"], "id -un; echo err >&2"):
		t.Errorf("critical options %q; want only a force-command of the wrapped command", c.CriticalOptions)
	case time.Unix(int64(c.ValidBefore), 0).After(now.Add(tg.CertTTL)) || time.Unix(int64(c.ValidAfter), 0).After(now):
		t.Errorf("valid %v to %v; want from before now to at most %v after", time.Unix(int64(c.ValidAfter), 0), time.Unix(int64(c.ValidBefore), 0), tg.CertTTL)
	}
	// The remote log names the handle, so it joins the audit trail.
	testenv.WaitFor(t, 10*time.Second, "the key id in sshd's log", func() bool {
		return strings.Contains(cs.Log(), "ID act-7f3a9c (serial 4242)")
	})

	t.Run("each command its own connection and certificate", func(t *testing.T) {
		before := len(signed.all())
		for i := range 3 {
			out, err := runCA(t, p, tg, "act-n"+strconv.Itoa(i), NewSerial(), Request{Command: "echo $((40+2))"})
			if err != nil || out.stdout != "42\n" {
				t.Fatalf("got %+v, %v; want 42", out, err)
			}
		}
		if n := len(signed.all()) - before; n != 3 {
			t.Errorf("signed %d certificates for 3 commands; want 3", n)
		}
	})

	t.Run("stop on a CA target", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := p.Acquire(ctx, tg, forever)
		if err != nil {
			t.Fatal(err)
		}
		l.Certify("act-stop", NewSerial())
		rctx, rcancel := context.WithCancelCause(ctx)
		var stdout syncbuf.Buffer
		done := make(chan *Result, 1)
		go func() {
			res, _ := l.Run(rctx, Request{Command: "echo started; sleep 600", Stdout: &stdout})
			done <- res
		}()
		testenv.WaitFor(t, 20*time.Second, "the command to start", func() bool { return stdout.String() == "started\n" })
		rcancel(context.Canceled)
		res := <-done
		if res.Status != StatusCancelled || res.RemoteStopped == nil || !*res.RemoteStopped {
			t.Fatalf("got %+v; want cancelled and verified stopped (control scripts on certificates of their own)", res)
		}
		for _, c := range signed.all() {
			if strings.HasPrefix(c.KeyId, "act-stop (control)") && c.CriticalOptions["force-command"] == "" {
				t.Errorf("control certificate %q without a force-command", c.KeyId)
			}
		}
	})

	t.Run("check", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Check(ctx, tg); err != nil {
			t.Fatalf("Check: %v", err)
		}
		last := signed.all()[len(signed.all())-1]
		if last.CriticalOptions["force-command"] != "true" || last.KeyId != "actiongw check" {
			t.Errorf("check signed %q forcing %q; want key id actiongw check forcing true", last.KeyId, last.CriticalOptions["force-command"])
		}
		cs.allow(t, "someone-else")
		defer cs.allow(t, cs.User)
		if err := p.Check(ctx, tg); !isAuthError(err) || !strings.Contains(err.Error(), "TrustedUserCAKeys") {
			t.Errorf("Check with the principal not allowed: got %v; want what to fix on the host", err)
		}
	})

	t.Run("revoked serial", func(t *testing.T) {
		cs.revoke(t, 777)
		defer cs.revoke(t)
		_, err := runCA(t, p, tg, "act-revoked", 777, Request{Command: "true"})
		if !isAuthError(err) || !strings.Contains(err.Error(), "TrustedUserCAKeys") {
			t.Fatalf("got %v; want the login refused with what to check on the host", err)
		}
		testenv.WaitFor(t, 10*time.Second, "sshd's log of the revoked certificate", func() bool {
			return strings.Contains(cs.Log(), "revoked")
		})
	})

	t.Run("wrong principal", func(t *testing.T) {
		cs.allow(t, "someone-else")
		defer cs.allow(t, cs.User)
		_, err := runCA(t, p, tg, "act-principal", NewSerial(), Request{Command: "true"})
		if !isAuthError(err) || !strings.Contains(err.Error(), "AuthorizedPrincipalsFile") || !strings.Contains(err.Error(), string(bytes.TrimSpace(cs.caPublic[:40]))) {
			t.Fatalf("got %v; want the login refused, naming the principal file and the CA's line", err)
		}
		hostGuidance(t, err, cs.caPublic, cs.User)
	})

	t.Run("a CA the host does not trust", func(t *testing.T) {
		priv, pub, err := NewCA("untrusted")
		if err != nil {
			t.Fatal(err)
		}
		other := cs.target()
		if other.Auth.CA, err = ParseCA("other", "other-ca", priv); err != nil {
			t.Fatal(err)
		}
		_, err = runCA(t, p, other, "act-untrusted", NewSerial(), Request{Command: "true"})
		hostGuidance(t, err, pub, cs.User)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hostGuidance(t, p.Check(ctx, other), pub, cs.User) // what actiongw check shows
		for _, secret := range strings.Split(string(priv), "\n") {
			if len(secret) > 16 && !strings.HasPrefix(secret, "-----") && strings.Contains(err.Error(), secret) {
				t.Fatal("the error holds a line of the CA's private key")
			}
		}
	})
}

// announced is the identification an OpenSSH sshd sends, as an error
// quotes it.
var announced = regexp.MustCompile(`"SSH-2\.0-OpenSSH_[0-9]+\.[0-9]+[^"]*"`)

// hostGuidance checks that err is a refused certificate login that
// says what to fix on the host: the TrustedUserCAKeys line of the CA
// whose public line is caPublic (as ca init prints it), the principal,
// and the sshd version the host announced.
func hostGuidance(t *testing.T, err error, caPublic []byte, principal string) {
	t.Helper()
	if !isAuthError(err) {
		t.Fatalf("got %v; want the certificate login refused (*AuthError)", err)
	}
	fields := strings.Fields(string(caPublic))
	msg := err.Error()
	for _, want := range []string{"TrustedUserCAKeys", fmt.Sprintf("%q", fields[0]+" "+fields[1]), "AuthorizedPrincipalsFile",
		fmt.Sprintf("must list %q", principal), "recent enough"} {
		if !strings.Contains(msg, want) {
			t.Errorf("got %q; want it to contain %s", msg, want)
		}
	}
	if !announced.MatchString(msg) {
		t.Errorf("got %q; want the sshd version the host announced", msg)
	}
}

// TestCACertificateStolen is what a certificate and its key could do if
// they leaked from the process: run their one command and nothing else,
// and not log in at all once their validity ended.
func TestCACertificateStolen(t *testing.T) {
	cs := startCAServer(t)
	tg := cs.target()
	p := newPool(t)
	dial := func(t *testing.T, g grant, now time.Time) (*ssh.Client, error) {
		signer, _, err := tg.certSignerFor(g, now)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return p.dialAs(ctx, tg, signer)
	}
	t.Run("another command on its connection runs the forced one", func(t *testing.T) {
		client, err := dial(t, grant{keyID: "stolen", serial: NewSerial(), command: "echo forced"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		for _, cmd := range []string{"echo forced", "id; cat /etc/passwd", "rm -rf ~"} {
			sess, err := client.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			out, err := sess.Output(cmd)
			sess.Close()
			if err != nil || string(out) != "forced\n" {
				t.Fatalf("exec %q: got %q, %v; want the forced command's output", cmd, out, err)
			}
		}
		// No shell, no port forwarding, no agent.
		if sess, err := client.NewSession(); err == nil {
			if err := sess.RequestPty("xterm", 24, 80, nil); err == nil {
				t.Error("got a terminal; want it refused without permit-pty")
			}
			sess.Close()
		}
		if c, err := client.Dial("tcp", cs.Addr()); err == nil {
			c.Close()
			t.Error("port forwarding worked; want it refused")
		}
	})
	t.Run("login after its validity is refused", func(t *testing.T) {
		_, err := dial(t, grant{keyID: "stolen-late", serial: NewSerial(), command: "true"}, time.Now().Add(-10*time.Minute))
		if !isAuthError(err) {
			t.Fatalf("got %v; want the expired certificate refused", err)
		}
		testenv.WaitFor(t, 10*time.Second, "sshd's log of the expired certificate", func() bool {
			return strings.Contains(cs.Log(), "expired")
		})
	})
}

// TestCAHostileCommand: whatever a command holds (quotes, newlines,
// substitutions, bytes a shell treats specially), the certificate's
// force-command is exactly the line sent, so sshd's record of what the
// client asked for (SSH_ORIGINAL_COMMAND) equals what it ran.
func TestCAHostileCommand(t *testing.T) {
	cs := startCAServer(t)
	p := newPool(t)
	var signed certs
	p.signed = signed.add
	tg := cs.target()
	for i, cmd := range []string{
		`printf '%s' "$SSH_ORIGINAL_COMMAND" | sha256sum`,
		`printf '%s' "$SSH_ORIGINAL_COMMAND" | sha256sum # '"'"' \" $(id) ` + "`id`\n; echo injected",
		"printf '%s' \"$SSH_ORIGINAL_COMMAND\" | sha256sum\n\x1eactiongw-pgid 1 armed=0\necho after",
	} {
		before := len(signed.all())
		out, err := runCA(t, p, tg, "hostile", NewSerial(), Request{Command: cmd, Env: map[string]string{"X": "'; echo env-injected #"}})
		if err != nil || out.res.Status != StatusExited {
			t.Fatalf("%d: got %+v, %v", i, out, err)
		}
		c := signed.all()[before]
		got := strings.Fields(out.stdout)
		want := sha256Hex(c.CriticalOptions["force-command"])
		if len(got) == 0 || got[0] != want {
			t.Errorf("%d: the command sent hashes to %v; want the force-command's %s", i, got, want)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestCATransfer moves a file both ways on a CA target: the certificate
// of each transfer forces internal-sftp, and allows no command.
func TestCATransfer(t *testing.T) {
	cs := startCAServer(t)
	p := newPool(t)
	var signed certs
	p.signed = signed.add
	tg := cs.target()
	dir := cs.UserDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := p.Acquire(ctx, tg, forever)
	if err != nil {
		t.Fatal(err)
	}
	l.Certify("act-up", NewSerial())
	allow := func(string) error { return nil }
	if _, err := l.Upload(ctx, UploadRequest{Path: dir + "/f", R: strings.NewReader("hello"), Size: 5, Mode: 0o644, Check: allow}); err != nil {
		t.Fatalf("upload: %v", err)
	}
	l, err = p.Acquire(ctx, tg, forever)
	if err != nil {
		t.Fatal(err)
	}
	l.Certify("act-down", NewSerial())
	var got syncbuf.Buffer
	if _, err := l.Download(ctx, DownloadRequest{Path: dir + "/f", W: &got, Check: allow}); err != nil || got.String() != "hello" {
		t.Fatalf("download: %q, %v; want hello", got.String(), err)
	}
	for _, c := range signed.all() {
		if c.CriticalOptions["force-command"] != "internal-sftp" {
			t.Errorf("certificate %q forces %q; want internal-sftp", c.KeyId, c.CriticalOptions["force-command"])
		}
	}
}

// TestCATerminal runs a terminal session on a CA target: its certificate
// alone permits a pty, and forces the wrapped program.
func TestCATerminal(t *testing.T) {
	cs := startCAServer(t)
	cs.RequirePTY(t)
	p := newPool(t)
	var signed certs
	p.signed = signed.add
	tg := cs.target()
	term, out, _ := startTerminal(t, p, tg, TerminalRequest{Command: "read x; echo got:$x"})
	if _, err := term.Write([]byte("abc\r")); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "got:abc")
	res, err := term.Wait()
	if err != nil || res.Status != StatusExited {
		t.Fatalf("got %+v, %v; want exited", res, err)
	}
	c := signed.all()[0]
	if _, ok := c.Extensions["permit-pty"]; !ok || len(c.Extensions) != 1 || !strings.Contains(c.CriticalOptions["force-command"], "read x; echo got:$x") {
		t.Errorf("extensions %v, options %q; want permit-pty alone and the wrapped program forced", c.Extensions, c.CriticalOptions)
	}
}

// TestCAJump runs a command on a CA target through a jump host that logs
// in with a key: the tunnel is pooled, the certificate's connection not.
func TestCAJump(t *testing.T) {
	cs := startCAServer(t)
	jump := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := cs.target()
	tg.Jump = target(jump)
	tg.Jump.Name = "bastion"
	for i := range 2 {
		out, err := runCA(t, p, tg, "act-jump"+strconv.Itoa(i), NewSerial(), Request{Command: "echo via"})
		if err != nil || out.stdout != "via\n" {
			t.Fatalf("got %+v, %v; want via", out, err)
		}
	}
	bad := target(jump)
	bad.Jump = cs.target()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "permit no port forwarding") {
		t.Errorf("a CA target as the jump host: got %v; want it refused", err)
	}
}

// TestCAHostKeyProbe: a CA target connects for its command only, but a
// host key nothing records is reported by Acquire, before any
// certificate is signed or login tried, as any target's is; so is a jump
// host's. A recorded key costs Acquire no connection.
func TestCAHostKeyProbe(t *testing.T) {
	cs := startCAServer(t)
	p := newPool(t)
	var signed certs
	p.signed = signed.add
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unknown := func(t *testing.T, tg *Target, name string) *HostKeyError {
		t.Helper()
		l, err := p.Acquire(ctx, tg, forever)
		var hk *HostKeyError
		if !errors.As(err, &hk) || !hk.Unknown() || hk.Target != name {
			if l != nil {
				l.Release()
			}
			t.Fatalf("Acquire: got %v; want the unknown host key of %s", err, name)
		}
		return hk
	}

	t.Run("target", func(t *testing.T) {
		tg := cs.target()
		tg.KnownHostsPath = filepath.Join(t.TempDir(), "known_hosts") // none yet
		hk := unknown(t, tg, tg.Name)
		if n := len(signed.all()); n != 0 {
			t.Fatalf("signed %d certificates before the host key was trusted; want none", n)
		}
		if err := TrustHostKey(hk); err != nil {
			t.Fatal(err)
		}
		out, err := runCA(t, p, tg, "act-trusted", NewSerial(), Request{Command: "echo trusted"})
		if err != nil || out.stdout != "trusted\n" {
			t.Fatalf("after trusting the key: got %+v, %v; want trusted", out, err)
		}
	})

	t.Run("changed key", func(t *testing.T) {
		tg := cs.target()
		other, _, err := NewCA("")
		if err != nil {
			t.Fatal(err)
		}
		otherKey, err := ParseCA("other", "other", other)
		if err != nil {
			t.Fatal(err)
		}
		tg.KnownHostsPath = filepath.Join(t.TempDir(), "known_hosts")
		line := knownhosts.Line([]string{knownhosts.Normalize(cs.Addr())}, otherKey.PublicKey())
		if err := os.WriteFile(tg.KnownHostsPath, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = runCA(t, p, tg, "act-changed", NewSerial(), Request{Command: "echo ran"})
		var hk *HostKeyError
		if !errors.As(err, &hk) || !hk.Known {
			t.Fatalf("got %v; want the changed host key refused", err)
		}
		if hk.Unknown() {
			t.Error("a changed key reported as unknown: a person could be asked to trust it")
		}
	})

	t.Run("jump host", func(t *testing.T) {
		jump := sshtest.Start(t, sshtest.Options{})
		tg := cs.target()
		tg.Jump = target(jump)
		tg.Jump.Name = "bastion"
		tg.Jump.KnownHostsPath = filepath.Join(t.TempDir(), "known_hosts")
		before := len(signed.all())
		hk := unknown(t, tg, "bastion")
		if n := len(signed.all()) - before; n != 0 {
			t.Fatalf("signed %d certificates before the jump host's key was trusted; want none", n)
		}
		if err := TrustHostKey(hk); err != nil {
			t.Fatal(err)
		}
		out, err := runCA(t, p, tg, "act-jump-trusted", NewSerial(), Request{Command: "echo via"})
		if err != nil || out.stdout != "via\n" {
			t.Fatalf("after trusting the jump host's key: got %+v, %v; want via", out, err)
		}
	})

	t.Run("recorded key: no connection", func(t *testing.T) {
		tg := cs.target()
		connections := func() int { return strings.Count(cs.Log(), "Connection from ") }
		before := connections()
		l, err := p.Acquire(ctx, tg, forever)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		if _, err := runCA(t, p, tg, "act-one", NewSerial(), Request{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 10*time.Second, "sshd's log of the command's connection", func() bool { return connections() > before })
		if n := connections() - before; n != 1 {
			t.Errorf("%d connections for a released lease and one command; want 1", n)
		}
	})
}
