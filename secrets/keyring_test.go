package secrets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestMain checks that no keyring call leaves a goroutine behind, even one
// that a context ended, and stops the tests' Secret Service.
func TestMain(m *testing.M) {
	testenv.Main(m, func() error { return goleak.Find() })
}

// realKeyring returns a Keyring on the tests' own Secret Service (see
// testenv.SecretService), under a service name of its own.
func realKeyring(t testing.TB) *Keyring {
	t.Helper()
	testenv.SecretService(t)
	return &Keyring{Service: "actiongw-test-" + rand.Text()[:10]}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

const pemKey = `-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDr1s2vY3yq3Qp2Xf0c9m1q2Vx0H4b5Y6W7s8t9u0v1wAAAJhxq2Nrcatj
-----END OPENSSH PRIVATE KEY-----
`

func TestRoundTrip(t *testing.T) {
	k := realKeyring(t)
	ctx := t.Context()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	cases := []struct {
		name  string
		value []byte
	}{
		{"web1-deploy-key", []byte(pemKey)},
		{"every-byte", all},
		{"large-16KiB", randomBytes(16 << 10)},
		{"one-byte", []byte("x")},
		{"clé-🔑-ключ", []byte("unicode name, value ünïcödé ✓")},
		{"crlf-and-trailing-newlines", []byte("a\r\nb\n\n")},
		{"invalid-utf8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x00}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := k.Set(ctx, c.name, c.value); err != nil {
				t.Fatalf("Set: %v", err)
			}
			got, err := k.Get(ctx, c.name)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(got.Reveal(), c.value) {
				t.Errorf("Get: got %d bytes %q…; want %d bytes %q…", got.Len(), head(got.Reveal()), len(c.value), head(c.value))
			}
			if ok, err := k.Present(ctx, c.name); !ok || err != nil {
				t.Errorf("Present: got %v, %v; want true, nil", ok, err)
			}
			if err := k.Delete(ctx, c.name); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			var nf *NotFoundError
			if _, err := k.Get(ctx, c.name); !errors.As(err, &nf) || nf.Name != c.name {
				t.Errorf("Get after Delete: got %v; want *NotFoundError{%q}", err, c.name)
			}
			if ok, err := k.Present(ctx, c.name); ok || err != nil {
				t.Errorf("Present after Delete: got %v, %v; want false, nil", ok, err)
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

func TestSetReplaces(t *testing.T) {
	k := realKeyring(t)
	ctx := t.Context()
	t.Cleanup(func() { k.Delete(context.Background(), "token") })
	for _, v := range []string{"first", "second"} {
		if err := k.Set(ctx, "token", []byte(v)); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	got, err := k.Get(ctx, "token")
	if err != nil || string(got.Reveal()) != "second" {
		t.Errorf("Get: got %q, %v; want \"second\", nil", got.Reveal(), err)
	}
}

// Items are plain Secret Service items: secret-tool reads what Set wrote,
// and Get reads what secret-tool stored.
func TestSecretToolInterop(t *testing.T) {
	k := realKeyring(t)
	secretTool := testenv.Command(t, "secret-tool", "libsecret-tools")
	ctx := t.Context()
	t.Cleanup(func() {
		k.Delete(context.Background(), "written-by-set")
		k.Delete(context.Background(), "written-by-secret-tool")
	})
	value := []byte(pemKey)
	if err := k.Set(ctx, "written-by-set", value); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, secretTool, "lookup", "service", k.Service, "username", "written-by-set").Output()
	if err != nil || !bytes.Equal(out, value) {
		t.Errorf("secret-tool lookup: got %q, %v; want %q", out, err, value)
	}

	store := exec.CommandContext(ctx, secretTool, "store", "--label=test", "service", k.Service, "username", "written-by-secret-tool")
	store.Stdin = bytes.NewReader(value)
	if out, err := store.CombinedOutput(); err != nil {
		t.Fatalf("secret-tool store: %v: %s", err, out)
	}
	got, err := k.Get(ctx, "written-by-secret-tool")
	if err != nil || !bytes.Equal(got.Reveal(), value) {
		t.Errorf("Get of secret-tool's item: got %q, %v; want %q", got.Reveal(), err, value)
	}
}

func TestMissing(t *testing.T) {
	k := realKeyring(t)
	ctx := t.Context()
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := k.Get(ctx, "never-set"); return err }},
		{"Delete", func() error { return k.Delete(ctx, "never-set") }},
	} {
		err := op.call()
		var nf *NotFoundError
		if !errors.As(err, &nf) || nf.Name != "never-set" {
			t.Errorf("%s: got %v; want *NotFoundError{\"never-set\"}", op.name, err)
			continue
		}
		if want := "actiongw secret set never-set"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %q; want it to name the command %q", op.name, err, want)
		}
	}
}

func TestLoad(t *testing.T) {
	k := realKeyring(t)
	ctx := t.Context()
	t.Cleanup(func() {
		k.Delete(context.Background(), "a")
		k.Delete(context.Background(), "b")
	})
	for _, n := range []string{"a", "b"} {
		if err := k.Set(ctx, n, []byte("value of "+n)); err != nil {
			t.Fatal(err)
		}
	}

	got, err := k.Load(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatalf("Load(a, b): %v", err)
	}
	for _, n := range []string{"a", "b"} {
		if v := string(got[n].Reveal()); v != "value of "+n {
			t.Errorf("Load(a, b)[%s]: got %q; want %q", n, v, "value of "+n)
		}
	}

	got, err = k.Load(ctx, []string{"a", "missing-1", "b", "missing-2"})
	if got != nil {
		t.Errorf("Load with missing names: got map %v; want nil", got)
	}
	var names []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var nf *NotFoundError
		if !errors.As(e, &nf) {
			t.Fatalf("Load with missing names: got %T %v in the joined error; want *NotFoundError", e, e)
		}
		names = append(names, nf.Name)
	}
	if fmt.Sprint(names) != "[missing-1 missing-2]" {
		t.Errorf("Load with missing names: got missing %v; want [missing-1 missing-2]", names)
	}
}

// Bad names and values are refused before any keyring call, so these run
// without a Secret Service.
func TestRefusedBeforeTheKeyring(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/actiongw-test-bus")
	k := &Keyring{Service: "actiongw-test-refused"}
	ctx := t.Context()
	var ne *NameError
	if _, err := k.Get(ctx, "two words"); !errors.As(err, &ne) {
		t.Errorf("Get(\"two words\"): got %v; want *NameError", err)
	}
	if err := k.Set(ctx, "x/y", []byte("v")); !errors.As(err, &ne) {
		t.Errorf("Set(\"x/y\"): got %v; want *NameError", err)
	}
	if _, err := k.Load(ctx, []string{"ok", ""}); !errors.As(err, &ne) && !errors.Is(err, ErrNoService) {
		t.Errorf("Load with an empty name: got %v; want *NameError or ErrNoService", err)
	}
	for _, v := range [][]byte{nil, make([]byte, MaxValueBytes+1)} {
		err := k.Set(ctx, "ok", v)
		if err == nil || errors.Is(err, ErrNoService) || !strings.Contains(err.Error(), "value") {
			t.Errorf("Set of %d bytes: got %v; want an error about the value", len(v), err)
		}
	}
}

// BenchmarkGet measures one Get of a 16 KiB secret from the real Secret
// Service, probe included; BenchmarkProbe measures the probe alone, the
// price of failing fast.
func BenchmarkGet(b *testing.B) {
	k := realKeyring(b)
	ctx := b.Context()
	value := randomBytes(16 << 10)
	if err := k.Set(ctx, "bench", value); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { k.Delete(context.Background(), "bench") })
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if _, err := k.Get(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProbe(b *testing.B) {
	realKeyring(b)
	ctx := b.Context()
	for b.Loop() {
		if err := probe(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPing(t *testing.T) {
	if err := realKeyring(t).Ping(t.Context()); err != nil {
		t.Errorf("Ping: got %v; want nil", err)
	}
}
