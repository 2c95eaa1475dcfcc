package auditexport

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/testkit/rsyslogtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// TestRsyslog sends a real audit log's records, hostile ones among them,
// to a real rsyslogd, in plain TCP and in TLS: every record arrives once,
// in order, byte for byte as the log has it, and rsyslogd's own parser
// finds the header and the structured data as they were sent, control
// characters escaped.
func TestRsyslog(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[useTLS], func(t *testing.T) {
			s := rsyslogtest.Start(t, rsyslogtest.Options{TLS: useTLS})
			cfg := Config{Addr: s.Addr, Hostname: "gw.test"}
			if useTLS {
				cfg.TLS = &tls.Config{RootCAs: s.CA, ServerName: "localhost"}
			}
			e := newExporter(t, cfg)
			const secret = "tok-7f3a9c1e5b"
			redact := func(v string) string { return strings.ReplaceAll(v, secret, "[REDACTED:api-token]") }
			var recs []*audit.Record
			for i := range 300 {
				cmd := fmt.Sprintf("echo %d", i)
				switch i % 50 {
				case 1:
					cmd = `echo "] [evil@32473 kind="seal"] \" \\ ]`
				case 2:
					cmd = "curl -H 'Authorization: Bearer " + secret + "'"
				case 3:
					cmd = strings.Repeat(`x"]\`, 50_000) // 200 kB, cut to a prefix
				case 4:
					cmd = "multi\nline\tcommand é \r\x1b[2J\x7f\u0085\u2028"
				}
				recs = append(recs, &audit.Record{Kind: audit.KindIntent, Handle: fmt.Sprintf("h%d", i), Tool: "ssh_exec", Target: "web1", Command: cmd, Decision: "allow"})
			}
			lines := auditLinesTo(t, e, redact, recs...)
			if err := closeWithin(t, e, time.Minute); err != nil {
				t.Fatal(err)
			}
			var got []rsyslogtest.Received
			testenv.WaitFor(t, time.Minute, "every record at rsyslogd", func() bool { got = s.Received(); return len(got) >= len(lines) })
			if len(got) != len(lines) {
				t.Fatalf("rsyslogd received %d messages; want %d", len(got), len(lines))
			}
			enc := newEncoder("gw.test", 0)
			for i, r := range got {
				m, err := rsyslogtest.Parse([]byte(r.Raw))
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if !bytes.Equal(m.Msg, lines[i]) {
					t.Fatalf("message %d: MSG %.200q; want the log's line %.200q", i, m.Msg, lines[i])
				}
				var rec audit.Record
				json.Unmarshal(lines[i], &rec)
				if cmd, _ := m.Param(sdID, "command"); cmd != controlsEscaped(rec.Command) {
					t.Errorf("message %d: command=%.80q; want %.80q, controls escaped", i, cmd, controlsEscaped(rec.Command))
				}
				want := parseFrame(t, enc.frame(nil, lines[i], false))
				if r.AppName != "actiongw" || r.Hostname != "gw.test" || r.MsgID != want.MsgID || r.SD != sdText(r.Raw) || len(m.SD) != 1 {
					t.Errorf("message %d: rsyslogd parsed %q %q %q, SD %.200q; want actiongw gw.test %s and the one element sent", i, r.AppName, r.Hostname, r.MsgID, r.SD, want.MsgID)
				}
				if strings.Contains(r.Raw, secret) {
					t.Errorf("message %d carries the secret", i)
				}
			}
		})
	}
}

// sdText is the STRUCTURED-DATA of a message as text: from the first '['
// after the header to the space before the MSG's byte order mark.
func sdText(raw string) string {
	start := strings.IndexByte(raw, '[')
	end := strings.Index(raw, " \xef\xbb\xbf")
	if start < 0 || end < start {
		return ""
	}
	return raw[start:end]
}

// auditLinesTo appends recs to a real audit log that hands its lines to
// e, and returns them.
func auditLinesTo(t *testing.T, e *Exporter, redact func(string) string, recs ...*audit.Record) [][]byte {
	t.Helper()
	lines := auditLines(t, redact, recs...)
	for _, l := range lines {
		e.Send(l)
	}
	return lines
}

// TestRsyslogRestart restarts rsyslogd while records stream to it: those
// written into the closing connection are sent again on the next one, so
// every record arrives, first in the order sent, and what the counters
// say was dropped or lost accounts for any that did not.
func TestRsyslogRestart(t *testing.T) {
	s := rsyslogtest.Start(t, rsyslogtest.Options{})
	e := newExporter(t, Config{Addr: s.Addr})
	const n = 6000
	seq := 0
	send := func(k int) {
		for range k {
			seq++
			e.Send(line(seq, 300))
		}
	}
	testenv.WaitFor(t, 30*time.Second, "the first connection", func() bool { return e.Stats().Connected })
	send(n / 3)
	// While the Exporter writes them: a restart as a service manager does it.
	testenv.WaitFor(t, 30*time.Second, "the first writes", func() bool { return e.Stats().Sent > 0 })
	s.Stop()
	send(n / 3) // queued, while nothing listens
	s.Restart()
	send(n - 2*(n/3))
	if err := closeWithin(t, e, time.Minute); err != nil {
		t.Error(err)
	}
	checkArrivals(t, s, e, n)
}

// TestRsyslogRestartBeyondWindow restarts rsyslogd with more records to
// send than the window holds: those written to the first connection,
// three windows' worth, and those queued while rsyslogd was down, three
// more. Only the window is sent again, as many records as its bound
// holds, the last written; every record still arrives or is counted.
// rsyslogd is stopped once it stored what it was sent, so that nothing
// unread (which only a window larger than the sockets' buffers covers,
// as the real one is) is lost with it.
func TestRsyslogRestartBeyondWindow(t *testing.T) {
	const window = 1 << 20 // 4 batches
	s := rsyslogtest.Start(t, rsyslogtest.Options{})
	e := newExporter(t, Config{Addr: s.Addr, Hostname: "gw.test", windowBytes: window})
	enc := newEncoder("gw.test", os.Getpid())
	frameBytes := func(seq int) int { return len(enc.frame(nil, line(seq, 2000), false)) }
	seq := 0
	send := func(bytes int) {
		for b := 0; b < bytes; b += frameBytes(seq) {
			seq++
			e.Send(line(seq, 2000))
		}
	}
	send(3 * window)
	first := seq
	testenv.WaitFor(t, time.Minute, "rsyslogd to store the first records", func() bool { return len(s.Received()) >= first })
	s.Stop()
	send(3 * window) // queued while nothing listens (a batch may go into the closed connection)
	s.Restart()
	send(window / 4)
	if err := closeWithin(t, e, time.Minute); err != nil {
		t.Error(err)
	}
	checkArrivals(t, s, e, seq)

	// The records sent again: the last written to the first connection,
	// in order, as many as the window's bound holds.
	var resent []int
	for _, r := range s.Received() {
		m, err := rsyslogtest.Parse([]byte(r.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Element(resentID); ok {
			resent = append(resent, seqOf(t, m))
		}
	}
	written := 0
	for _, sq := range resent {
		written += frameBytes(sq)
	}
	if len(resent) == 0 || resent[0] <= 1 {
		t.Fatalf("records %v sent again; want the window's, not from the first record on", resent)
	}
	for i := 1; i < len(resent); i++ {
		if resent[i] != resent[i-1]+1 {
			t.Fatalf("records sent again %v: not one run of records", resent)
		}
	}
	if last := resent[len(resent)-1]; last < first || written > window || written+frameBytes(resent[0]-1) <= window {
		t.Errorf("records %d to %d sent again, %d bytes of frames; want up to record %d or later, as many as %d bytes hold", resent[0], last, written, first, window)
	}
}

// checkArrivals waits until every record e sent, seq 1 to n, that its
// counters do not say was dropped or lost has reached s, and checks that
// they first arrived in order, after at least one reconnect.
func checkArrivals(t *testing.T, s *rsyslogtest.Server, e *Exporter, n int) {
	t.Helper()
	st := e.Stats()
	first := map[int]bool{}
	var order []int
	testenv.WaitFor(t, time.Minute, "every record not counted dropped or lost", func() bool {
		clear(first)
		order = order[:0]
		for _, r := range s.Received() {
			m, err := rsyslogtest.Parse([]byte(r.Raw))
			if err != nil {
				t.Fatal(err)
			}
			if sq := seqOf(t, m); !first[sq] {
				first[sq] = true
				order = append(order, sq)
			}
		}
		return int64(len(first))+st.Dropped+st.Lost >= int64(n)
	})
	t.Logf("stats after the restart: %+v; %d messages received for %d records", st, len(s.Received()), n)
	if int64(len(first))+st.Dropped+st.Lost != int64(n) || st.Sent+st.Dropped != int64(n) {
		t.Errorf("%d records arrived, %d dropped, %d lost, %d sent; want arrived + dropped + lost = sent + dropped = %d", len(first), st.Dropped, st.Lost, st.Sent, n)
	}
	if st.Reconnects < 1 {
		t.Errorf("%d reconnects; want at least 1", st.Reconnects)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("record %d first arrived after record %d", order[i], order[i-1])
		}
	}
}

// TestRsyslogTLSUntrusted: a receiver whose certificate does not chain
// to the trusted CA gets nothing; the failure is counted, not hidden.
func TestRsyslogTLSUntrusted(t *testing.T) {
	s := rsyslogtest.Start(t, rsyslogtest.Options{TLS: true})
	e := newExporter(t, Config{Addr: s.Addr, TLS: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}})
	e.Send(line(1, 100))
	testenv.WaitFor(t, 30*time.Second, "a failed handshake", func() bool { return e.Stats().LastError != "" })
	closeWithin(t, e, 0)
	if st := e.Stats(); st.Sent != 0 || st.Lost != 1 || !strings.Contains(st.LastError, "certificate") {
		t.Errorf("stats %+v; want nothing sent, 1 lost, a certificate error", st)
	}
	if got := s.Received(); len(got) != 0 {
		t.Errorf("rsyslogd received %d messages", len(got))
	}
}
