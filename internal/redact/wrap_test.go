package redact

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// encoder is one way a host prints base64: the alphabet, whether it pads,
// and how it wraps: width characters a line (0: one line), each line
// ended by eol, the last one too when final is set.
type encoder struct {
	enc   *base64.Encoding
	width int
	eol   string
	final bool
}

// The encoders docs/security.md lists, at their default widths; wrapAt sets
// another width.
var (
	gnuBase64     = encoder{base64.StdEncoding, 76, "\n", true}
	opensslBase64 = encoder{base64.StdEncoding, 64, "\n", true}
	pythonBase64  = encoder{base64.StdEncoding, 76, "\n", true} // base64.encodebytes
	mimeBase64    = encoder{base64.StdEncoding, 76, "\r\n", false}
	urlBase64     = encoder{base64.RawURLEncoding, 0, "", false}
)

func (e encoder) wrapAt(width int, eol string) encoder { e.width, e.eol = width, eol; return e }

func (e encoder) encode(data []byte) string {
	s := e.enc.EncodeToString(data)
	if e.width == 0 {
		return s
	}
	out := wrapLines(s, e.width, e.eol)
	if !e.final {
		out = strings.TrimSuffix(out, e.eol)
	}
	return out
}

// leaks returns the first run of 8 or more bytes of secret that a reader
// of out can decode (see decodings). Runs of secret that also stand in
// allowed (the data around the secret, which the reader may see) do not
// count.
func leaks(out string, secret []byte, allowed []byte) []byte {
	for _, dec := range decodings(out) {
		for i := 0; i+8 <= len(secret); i++ {
			w := secret[i : i+8]
			if bytes.Contains(dec, w) && !bytes.Contains(allowed, w) {
				return w
			}
		}
	}
	return nil
}

// decodings returns what a reader can decode from out: out without its
// line breaks, each run of base64 characters decoded from each of its
// first 4 characters, in both alphabets.
func decodings(out string) [][]byte {
	joined := strings.NewReplacer("\r", "", "\n", "").Replace(out)
	var runs []string
	start := -1
	for i := 0; i <= len(joined); i++ {
		if i < len(joined) && strings.IndexByte(base64Alphabet, joined[i]) >= 0 {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			runs = append(runs, joined[start:i])
			start = -1
		}
	}
	var decs [][]byte
	for _, run := range runs {
		for off := 0; off < 4 && off < len(run); off++ {
			r := run[off:]
			r = r[:len(r)/4*4]
			std := strings.NewReplacer("-", "+", "_", "/").Replace(r)
			if dec, err := base64.StdEncoding.DecodeString(std); err == nil {
				decs = append(decs, dec)
			}
		}
	}
	return decs
}

// TestWrappedBase64AnyPlace encodes a token inside longer data, at every
// place in it, as each encoder docs/security.md lists does, wrapped at widths
// from 4 to 1024 columns with LF and CRLF: no 8 bytes of the token can be
// decoded from what is left. A redactor that knew only the lines of the
// token's own base64 at 76 and 64 columns let it through whenever it sat
// in longer data and crossed a line break (34 of 76 offsets, 40 of 64).
func TestWrappedBase64AnyPlace(t *testing.T) {
	secret := []byte(token)
	r, err := newRedactor(map[string][]byte{"gh": secret})
	if err != nil {
		t.Fatal(err)
	}
	var widths []int
	for w := 4; w <= 80; w++ {
		widths = append(widths, w)
	}
	widths = append(widths, 100, 128, 256, 512, 1000, 1024)
	for _, base := range []encoder{gnuBase64, opensslBase64, pythonBase64, mimeBase64, urlBase64} {
		for _, width := range widths {
			for _, eol := range []string{"\n", "\r\n"} {
				e := base.wrapAt(width, eol)
				// Every alignment of the token in the data and every place
				// of it relative to the line breaks.
				for pre := 0; pre < 3*width/4+3 && pre < 130; pre++ {
					prefix := bytes.Repeat([]byte("\xa5"), pre)
					copy(prefix, "Authorization: Bearer ")
					data := append(append(prefix, secret...), "\nnext line\n"...)
					out := r.RedactString(e.encode(data))
					if w := leaks(out, secret, nil); w != nil {
						t.Fatalf("width %d, eol %q, %d bytes before the token: %q of it can be decoded from %q", width, eol, pre, w, out)
					}
				}
			}
		}
	}
}

// TestKeyBodiesStoredOnAHost puts a private key file, as each kind of key
// is stored, in longer data (a tar archive, say) and encodes it as the
// encoders do, at many widths and places: no 8 bytes of the key file can
// be decoded from what is left. The same for the key's body printed
// without its armour and wrapped anew.
func TestKeyBodiesStoredOnAHost(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	openssh, err := ssh.MarshalPrivateKey(edKey, "")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{
		"OpenSSH ed25519": pem.EncodeToMemory(openssh),
		"PKCS#1 RSA":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
		"PKCS#8 P-256":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
	rng := mrand.New(mrand.NewPCG(36, 3))
	for name, key := range keys {
		r, err := newRedactor(map[string][]byte{"key": key})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(key), "\n"), "\n")
		body := strings.Join(lines[1:len(lines)-1], "")
		for _, width := range []int{4, 5, 7, 13, 33, 60, 64, 70, 76, 77, 100, 1024} {
			for _, eol := range []string{"\n", "\r\n"} {
				for _, base := range []encoder{gnuBase64, mimeBase64, urlBase64.wrapAt(0, "")} {
					e := base
					if base.width != 0 {
						e = base.wrapAt(width, eol)
					}
					for range 4 {
						// A tar header's worth of other bytes before the file.
						prefix := make([]byte, rng.IntN(600))
						for i := range prefix {
							prefix[i] = byte(rng.IntN(256))
						}
						file := key
						if eol == "\r\n" {
							file = bytes.ReplaceAll(key, []byte("\n"), []byte("\r\n"))
						}
						data := append(append(prefix, file...), make([]byte, 512)...)
						out := r.RedactString(e.encode(data))
						// The armour is public.
						public := append(append(bytes.Clone(prefix), lines[0]+"\n"...), lines[len(lines)-1]...)
						if w := leaks(out, file, public); w != nil {
							t.Fatalf("%s in a tar, base64 at %d columns, eol %q: %q of the key file can be decoded", name, width, eol, w)
						}
					}
				}
				// The body alone, wrapped anew: no 12 of its characters are
				// left.
				out := r.RedactString("$ grep -v -- ----- key | tr -d '\\n' | fold -w N\n" + wrapLines(body, width, eol) + "$ ")
				joined := strings.NewReplacer("\r", "", "\n", "").Replace(out)
				for i := 0; i+12 <= len(body); i++ {
					if strings.Contains(joined, body[i:i+12]) {
						t.Fatalf("%s body wrapped at %d columns, eol %q: %q of it is left in %q", name, width, eol, body[i:i+12], out)
					}
				}
			}
		}
	}
}

// FuzzWrappedBase64 encodes a secret inside random data as an encoder the
// fuzzer picks, wrapped at 4 to 1024 columns, and redacts it whole and in
// writes of random sizes: no 8 bytes of the secret can be decoded from
// the output. The data around the secret is drawn from bytes the secret
// does not use, so that none of it can be mistaken for it.
func FuzzWrappedBase64(f *testing.F) {
	f.Add([]byte("Authorization: Bearer "), []byte(token), []byte("\n"), uint16(76), uint8(0), []byte{7, 200})
	f.Add([]byte("x"), []byte("hunter2hunter2"), []byte(""), uint16(64), uint8(5), []byte{1})
	f.Add([]byte("ab"), []byte("-----BEGIN KEY-----\nMIIBVwIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----\n"), []byte("zz"), uint16(4), uint8(2), []byte{3, 3})
	f.Fuzz(func(t *testing.T, prefix, secret, suffix []byte, width uint16, kind uint8, chunks []byte) {
		if len(secret) < 12 || len(secret) > 256 || len(prefix) > 512 || len(suffix) > 512 {
			t.Skip("a secret of 12 to 256 bytes in at most 1 KiB of data")
		}
		// Bytes the secret has are moved out of the data around it.
		used := map[byte]bool{}
		for _, c := range secret {
			used[c] = true
		}
		around := func(b []byte) []byte {
			b = bytes.Clone(b)
			for i, c := range b {
				for n := 0; used[c] && n < 256; n++ {
					c++
				}
				b[i] = c
			}
			return b
		}
		prefix, suffix = around(prefix), around(suffix)
		encoders := []encoder{gnuBase64, opensslBase64, pythonBase64, mimeBase64, urlBase64, urlBase64.wrapAt(1, "\n")}
		e := encoders[int(kind)%len(encoders)]
		if e.width != 0 {
			e = e.wrapAt(4+int(width)%1021, []string{"\n", "\r\n"}[kind/128])
		}
		data := append(append(bytes.Clone(prefix), secret...), suffix...)
		in := []byte(e.encode(data))
		r, err := New([]Secret{{Name: "s", Value: secret}})
		if err != nil {
			t.Fatal(err)
		}
		allowed := append(append(bytes.Clone(prefix), 0), suffix...)
		// The data around the secret, decoded from a character off its
		// own alignment, can read as bytes of the secret ("\f\f\f" is
		// "DAwM", "000" is "MDAw"): what a reader decodes of the data
		// with other bytes in the secret's place is not the secret's.
		for _, dec := range decodings(e.encode(append(append(bytes.Clone(prefix), around(secret)...), suffix...))) {
			allowed = append(append(allowed, 0), dec...)
		}
		if w := leaks(string(r.Redact(in)), secret, allowed); w != nil {
			t.Fatalf("Redact: %q of the secret can be decoded", w)
		}
		if w := leaks(string(redactChunked(r, in, fuzzSizes(chunks))), secret, allowed); w != nil {
			t.Fatalf("streamed: %q of the secret can be decoded", w)
		}
	})
}
