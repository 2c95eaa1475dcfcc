package gateway

import (
	"bytes"
	"slices"
	"testing"

	"github.com/actiongw/actiongw/internal/redact"
)

// TestFollowRedactorSameSecrets: the keyring read again with the same
// secrets (what refreshed does every secretRetry while a secret fails to
// load, and a reload that changed no secret) adds no stage to a running
// action's streams: each stage redacts every byte again, for the rest of
// the action's life (a tail -f for days).
func TestFollowRedactorSameSecrets(t *testing.T) {
	g := &Gateway{}
	known := []redact.Secret{{Name: "db.password", Value: []byte("hunter2-hunter2")}}
	if err := g.publishRedactor(known); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	f := g.follow(&got, g.red.Load())
	for range 100 {
		if err := g.publishRedactor(slices.Clone(known)); err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("line\n"))
	}
	if err := g.publishRedactor(append(slices.Clone(known), redact.Secret{Name: "api.token", Value: []byte("tok-0123456789abcdef")})); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("tok-0123456789abcdef\n"))
	f.end(false)
	if len(f.stages) != 1 {
		t.Errorf("got %d stages after 100 republications of the same secrets and one new secret; want 1", len(f.stages))
	}
	if want := bytes.Repeat([]byte("line\n"), 100); !bytes.HasPrefix(got.Bytes(), want) || bytes.Contains(got.Bytes(), []byte("tok-0123456789abcdef")) {
		t.Errorf("output %q; want the lines and the new secret redacted", got.Bytes())
	}
}
