//go:build unix

package httpact

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// benchBase returns nginx's base URL if nginx is installed, else an
// in-process server with the same /api/small and /api/big.
func benchBase(b *testing.B) string {
	if _, err := testenv.LookPath("nginx"); err == nil {
		return startNginx(b, "http://127.0.0.1:1")
	}
	b.Log("nginx not installed: benchmarking against net/http/httptest")
	big := make([]byte, 64<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("/api/big", func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv.URL
}

func percentiles(d []time.Duration) (p50, p95 time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*95/100]
}

// curlLatency has one curl process fetch url n times over one kept-alive
// connection, the way httpact's pool does, and returns its percentiles.
func curlLatency(url string, n int) (p50, p95 time.Duration, err error) {
	args := []string{"-s", "-w", "\n%{time_total}\n", "-H", "Authorization: Bearer " + testToken}
	for range n + 1 {
		args = append(args, url)
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		return 0, 0, err
	}
	var d []time.Duration
	for _, line := range strings.Split(string(out), "\n") {
		if s, err := strconv.ParseFloat(line, 64); err == nil {
			d = append(d, time.Duration(s*float64(time.Second)))
		}
	}
	if len(d) != n+1 {
		return 0, 0, fmt.Errorf("curl reported %d timings; want %d", len(d), n+1)
	}
	p50, p95 = percentiles(d[1:]) // the first one connects
	return p50, p95, nil
}

// BenchmarkGetSmall measures a small GET on a warm connection through Do
// and, in the same run, curl against the same server.
func BenchmarkGetSmall(b *testing.B) {
	base := benchBase(b)
	c, _ := newTestClient(b)
	c.logger = slog.New(slog.DiscardHandler) // production logs at info: skip the per-request debug line
	e := &Endpoint{Name: "bench", BaseURL: base + "/api", Auth: bearer(), AllowPrivate: true}
	ctx := context.Background()
	req := Request{Method: "GET", Path: "/small"}
	if res, err := c.Do(ctx, e, req, io.Discard); err != nil || res.Status != StatusOK {
		b.Fatalf("warm-up: %+v, %v", res, err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := c.Do(ctx, e, req, io.Discard)
		lat = append(lat, time.Since(start))
		if err != nil || res.Status != StatusOK {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	b.StopTimer()
	p50, p95 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p95.Microseconds()), "p95-us")
	if _, err := exec.LookPath("curl"); err != nil {
		b.Log("curl not installed: no baseline")
		return
	}
	// Right after httpact's run, so both see the same machine load.
	cp50, cp95, err := curlLatency(base+"/api/small", min(b.N, 2000))
	if err != nil {
		b.Fatalf("curl: %v", err)
	}
	b.ReportMetric(float64(cp50.Microseconds()), "curl-p50-us")
	b.ReportMetric(float64(cp95.Microseconds()), "curl-p95-us")
}

// BenchmarkBody measures body throughput: a 64 MiB response copied into a
// writer that keeps nothing.
func BenchmarkBody(b *testing.B) {
	base := benchBase(b)
	c, _ := newTestClient(b)
	e := &Endpoint{Name: "bench", BaseURL: base + "/api", AllowPrivate: true, MaxResponseBody: 1 << 30}
	b.SetBytes(64 << 20)
	for b.Loop() {
		res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/big"}, io.Discard)
		if err != nil || res.Status != StatusOK || res.BodyBytes != 64<<20 {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

// BenchmarkGetSmallStdlib is the floor under BenchmarkGetSmall: a bare
// net/http client on a warm connection to the same server.
func BenchmarkGetSmallStdlib(b *testing.B) {
	base := benchBase(b)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	lat := make([]time.Duration, 0, b.N)
	for i := -1; i < b.N; i++ { // i == -1 warms the connection
		if i == 0 {
			b.ResetTimer()
		}
		start := time.Now()
		resp, err := hc.Get(base + "/api/small")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i >= 0 {
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	p50, p95 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p95.Microseconds()), "p95-us")
}
