package redact

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"golang.org/x/crypto/ssh"
)

// BenchmarkStreamKey streams log text in writes of several sizes through
// a Redactor of 9 tokens, and of the same tokens and an RSA-4096 private
// key in OpenSSH format, whose whole forms (its hex is about 6.7 KB) are
// far longer than a write: the key's run against the tokens' alone, in
// the same run, is what its long patterns cost.
func BenchmarkStreamKey(b *testing.B) {
	priv, err := rsa.GenerateKey(rand.Reader, 4096)
	if err != nil {
		b.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		b.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(3, 5))
	tokens := map[string][]byte{}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for i := range 9 {
		v := []byte("ghp_")
		for range 36 {
			v = append(v, alphabet[rng.IntN(len(alphabet))])
		}
		tokens[fmt.Sprintf("token-%d", i)] = v
	}
	withKey := map[string][]byte{"ssh-key": pem.EncodeToMemory(block)}
	for name, v := range tokens {
		withKey[name] = v
	}
	var data []byte
	for len(data) < 4<<20 {
		data = fmt.Appendf(data, "2026-01-02T03:04:05.%06dZ level=info host=web-%02d id=%08x msg=\"GET /api/v1/items?page=%d done\" status=200 bytes=%d dur=%dms\n",
			rng.IntN(1e6), rng.IntN(40), rng.Uint32(), rng.IntN(100), rng.IntN(1e5), rng.IntN(900))
	}
	for _, sc := range []struct {
		name    string
		secrets map[string][]byte
	}{{"tokens", tokens}, {"tokens+key", withKey}} {
		r, err := newRedactor(sc.secrets)
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range []int{256, 4 << 10, 32 << 10} {
			b.Run(fmt.Sprintf("%s/write=%d", sc.name, size), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				w := r.NewStream(func([]byte) {})
				for b.Loop() {
					for off := 0; off < len(data); off += size {
						w.Write(data[off:min(off+size, len(data))])
					}
				}
			})
		}
	}
}
