//go:build unix

package sshexec

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
)

// BenchmarkSign is what a CA target adds to each command before it
// dials: a new ed25519 key and a certificate for it, signed by the CA.
func BenchmarkSign(b *testing.B) {
	priv, _, err := NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	ca, err := ParseCA("bench", "bench-ca", priv)
	if err != nil {
		b.Fatal(err)
	}
	tg := &Target{Name: "bench", User: "deploy", Auth: Auth{CA: ca, CASecret: "bench-ca"}, CertTTL: 2 * time.Minute}
	g := grant{keyID: "out_bench", serial: NewSerial(), command: "true"}
	for b.Loop() {
		if _, _, err := tg.certSignerFor(g, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCATrue is warm `true` on a CA target (a new connection and
// certificate for each command), on a key target (a pooled connection),
// and as a bare x/crypto client does it without a pool (dial, handshake
// with a plain key, session, exec, close), alternating so that the three
// see the same load. It reports each one's p50 and p95, and the CA
// target's p50 over the bare dial's: the goal is at most 3.
func BenchmarkCATrue(b *testing.B) {
	cs := startCAServer(b)
	plain := sshtest.Start(b, sshtest.Options{})
	p := NewPool(nil)
	defer p.Close()
	caTarget, keyTarget := cs.target(), target(plain)
	ctx := context.Background()
	run := func(tg *Target) {
		res, err := p.Run(ctx, tg, Request{Command: "true"})
		if err != nil || res.Status != StatusExited {
			b.Fatalf("%s: got %+v, %v", tg.Name, res, err)
		}
	}
	signer, err := ssh.ParsePrivateKey(plain.ClientKey)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &ssh.ClientConfig{User: plain.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(plain.HostKeys[0]), HostKeyAlgorithms: []string{plain.HostKeys[0].Type()}}
	addr := net.JoinHostPort(plain.Host, strconv.Itoa(plain.Port))
	bare := func() {
		c, err := ssh.Dial("tcp", addr, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		if err := sess.Run("true"); err != nil {
			b.Fatal(err)
		}
	}
	run(caTarget) // warm: sshd's first forks, the page cache
	run(keyTarget)
	bare()
	var ca, key, dial []time.Duration
	timed := func(d *[]time.Duration, f func()) {
		start := time.Now()
		f()
		*d = append(*d, time.Since(start))
	}
	for b.Loop() {
		timed(&ca, func() { run(caTarget) })
		timed(&key, func() { run(keyTarget) })
		timed(&dial, bare)
	}
	reportPercentiles(b, "ca-", ca)
	reportPercentiles(b, "key-", key)
	reportPercentiles(b, "bare-dial-", dial)
	b.ReportMetric(p50(ca)/p50(dial), "ca/bare-dial-p50")
	b.ReportMetric(0, "ns/op") // the percentiles are the figures
}

// p50 is the median of d, sorted.
func p50(d []time.Duration) float64 { return float64(d[(len(d)-1)/2]) }
