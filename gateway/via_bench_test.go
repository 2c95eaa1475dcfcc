//go:build unix

package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/sshexec"
)

// viaBench is an API on loopback (/small: 6 bytes; /big: size bytes),
// an sshd, and two endpoints on the API: direct (allow_private) and via
// the sshd's target.
type viaBench struct {
	size           int64
	sshd           *sshtest.Server
	pool           *sshexec.Pool
	target         *sshexec.Target
	client         *httpact.Client
	direct, viaEnd *httpact.Endpoint
}

func newViaBench(b *testing.B) *viaBench {
	size := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("VIA_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		size = v
	}
	chunk := make([]byte, 256<<10)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; {
			n, err := w.Write(chunk[:min(left, int64(len(chunk)))])
			if err != nil {
				return
			}
			left -= int64(n)
		}
	})
	api := httptest.NewServer(mux)
	b.Cleanup(api.Close)
	s := sshtest.Start(b, sshtest.Options{})
	pool := sshexec.NewPool(nil)
	b.Cleanup(func() { pool.Close() })
	t := &sshexec.Target{Name: "bastion", Host: s.Host, Port: s.Port, User: s.User, KnownHostsPath: s.KnownHosts,
		Auth: sshexec.Auth{PrivateKey: s.ClientKey}, MaxSessions: 10, Keepalive: 15 * time.Second}
	client := httpact.NewClient(nil)
	b.Cleanup(client.Close)
	via := &httpact.Via{Name: "bastion", Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		return pool.DialTCP(ctx, t, addr)
	}}
	return &viaBench{size: size, sshd: s, pool: pool, target: t, client: client,
		direct: &httpact.Endpoint{Name: "direct", BaseURL: api.URL, AllowPrivate: true, Auth: httpact.Auth{Kind: httpact.AuthNone}},
		viaEnd: &httpact.Endpoint{Name: "via", BaseURL: api.URL, Via: via, MaxConns: 10, Auth: httpact.Auth{Kind: httpact.AuthNone}}}
}

func (v *viaBench) get(b *testing.B, e *httpact.Endpoint, path string, want int64) time.Duration {
	start := time.Now()
	res, err := v.client.Do(context.Background(), e, httpact.Request{Method: "GET", Path: path}, io.Discard)
	if err != nil || res.Status != httpact.StatusOK || res.BodyBytes != want {
		b.Fatalf("GET %s on %s: %+v, %v", path, e.Name, res, err)
	}
	return time.Since(start)
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkViaGetSmall: a warm GET of 6 bytes through the bastion's
// channel and directly, alternating, and one SSH round trip (a
// keepalive on a bare x/crypto connection to the same sshd). The issue
// asks via's p50 ≤ 1.5 × direct's + one round trip; budget_ratio is
// via's p50 over that budget (≤ 1 meets it).
func BenchmarkViaGetSmall(b *testing.B) {
	v := newViaBench(b)
	signer, err := ssh.ParsePrivateKey(v.sshd.ClientKey)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := ssh.Dial("tcp", v.sshd.Addr(), &ssh.ClientConfig{User: v.sshd.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(v.sshd.HostKeys[0]), HostKeyAlgorithms: []string{ssh.KeyAlgoED25519}})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	v.get(b, v.direct, "/small", 6) // warm both
	v.get(b, v.viaEnd, "/small", 6)
	var direct, via, rtt []time.Duration
	for b.Loop() {
		direct = append(direct, v.get(b, v.direct, "/small", 6))
		via = append(via, v.get(b, v.viaEnd, "/small", 6))
		start := time.Now()
		if _, _, err := raw.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			b.Fatal(err)
		}
		rtt = append(rtt, time.Since(start))
	}
	d, w, r := p50(direct), p50(via), p50(rtt)
	b.ReportMetric(float64(d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(w.Microseconds()), "via-p50-µs")
	b.ReportMetric(float64(r.Microseconds()), "ssh-rtt-p50-µs")
	b.ReportMetric(float64(w)/(1.5*float64(d)+float64(r)), "budget_ratio")
}

// BenchmarkViaBody drains VIA_BENCH_BYTES (default 1 GiB) through the
// bastion's channel, and in the same iteration the same number of bytes
// of `head -c` through ssh_exec's path (Pool.Run) on the same pooled
// connection. It reports each one's MB/s and via's over exec's (the
// issue asks ≥ 0.8), and this process's CPU seconds per GB for each
// (via's includes the in-process API server's writes).
func BenchmarkViaBody(b *testing.B) {
	v := newViaBench(b)
	pid := os.Getpid()
	cpu := func() time.Duration {
		c, err := proc.CPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	command := fmt.Sprintf("head -c %d /dev/zero", v.size)
	var viaWall, execWall, viaCPU, execCPU time.Duration
	for b.Loop() {
		c := cpu()
		viaWall += v.get(b, v.viaEnd, "/big", v.size)
		viaCPU += cpu() - c

		c, start := cpu(), time.Now()
		res, err := v.pool.Run(context.Background(), v.target, sshexec.Request{Command: command, Stdout: io.Discard})
		if err != nil || res.StdoutBytes != v.size {
			b.Fatalf("exec: %+v, %v", res, err)
		}
		execWall += time.Since(start)
		execCPU += cpu() - c
	}
	gb := float64(v.size) * float64(b.N) / 1e9
	viaRate, execRate := gb*1e3/viaWall.Seconds(), gb*1e3/execWall.Seconds()
	b.ReportMetric(viaRate, "via-MB/s")
	b.ReportMetric(execRate, "exec-MB/s")
	b.ReportMetric(viaRate/execRate, "rate_ratio")
	b.ReportMetric(viaCPU.Seconds()/gb, "via-cpu-s/GB")
	b.ReportMetric(execCPU.Seconds()/gb, "exec-cpu-s/GB")
}
