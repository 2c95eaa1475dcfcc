package rsyslogtest

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
)

// Options vary Start.
type Options struct {
	// TLS makes the listener TLS (the gtls driver) with a certificate for
	// 127.0.0.1 and localhost from a CA of the test's own (Server.CAFile).
	// Clients need not present a certificate.
	TLS bool
}

// Server is a running rsyslogd.
type Server struct {
	// Addr is where it listens: "127.0.0.1:port".
	Addr string
	// CAFile is, with TLS, the PEM certificate of the CA that signed the
	// server's; CA holds it.
	CAFile string
	CA     *x509.CertPool

	t        testing.TB
	rsyslogd string
	dir      string
	conf     string
	received string

	mu     sync.Mutex
	cmd    *exec.Cmd // nil while stopped
	exited <-chan struct{}
	log    *syncbuf.Buffer
}

// startTimeout bounds rsyslogd's start-up and its stop, which take
// milliseconds when the machine is idle.
const startTimeout = 30 * time.Second

// Start starts rsyslogd on a free loopback port; it is stopped at
// cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, rsyslogd: rsyslogdPath(t), dir: t.TempDir()}
	s.received = filepath.Join(s.dir, "received.log")
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	var tlsConf string
	if opts.TLS {
		if !gtlsDriver() {
			testenv.Missing(t, "rsyslog's TLS driver (lmnsd_gtls)", "install rsyslog-gnutls (apt-get install rsyslog-gnutls), "+testenv.Setup)
		}
		tlsConf = s.makeCerts()
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	// Only what is written here: no imuxsock (/dev/log), no imklog, no
	// DNS lookups of the peers, control characters kept as received (a
	// NUL byte still becomes "#000"), room for the largest record.
	// One line of the file is one message: the message as received
	// (rawmsg) and what rsyslogd's RFC 5424 parser made of it, as JSON.
	// Everything else (rsyslogd's own messages) goes to rsyslogd.log, for
	// a failed test to show.
	conf := fmt.Sprintf(`global(workDirectory=%[1]q maxMessageSize="256k" net.enableDNS="off"
       parser.escapeControlCharactersOnReceive="off"%[2]s)
module(load="imtcp"%[3]s)
input(type="imtcp" address="127.0.0.1" port=%[4]q)
template(name="raw" type="string" string="{\"raw\":\"%%rawmsg:::json%%\",\"app\":\"%%app-name:::json%%\",\"host\":\"%%hostname:::json%%\",\"msgid\":\"%%msgid:::json%%\",\"sd\":\"%%structured-data:::json%%\"}\n")
if $inputname == "imtcp" then {
  action(type="omfile" file=%[5]q template="raw")
  stop
}
action(type="omfile" file=%[6]q)
`, s.dir, tlsConf, map[bool]string{true: ` StreamDriver.Name="gtls" StreamDriver.Mode="1" StreamDriver.AuthMode="anon"`}[opts.TLS],
		port, s.received, filepath.Join(s.dir, "rsyslogd.log"))
	s.conf = filepath.Join(s.dir, "rsyslog.conf")
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("rsyslogd: %v\n%s", err, s.Log())
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("rsyslogd:\n%s", s.Log())
		}
	})
	return s
}

// rsyslogdPath returns rsyslogd's path, or ends t with testenv.Missing.
func rsyslogdPath(t testing.TB) string {
	t.Helper()
	if p, err := testenv.LookPath("rsyslogd"); err == nil {
		return p
	}
	testenv.Missing(t, "rsyslogd", "install rsyslog (apt-get install rsyslog), "+testenv.Setup)
	return ""
}

// gtlsDriver reports whether rsyslog's GnuTLS driver is installed.
func gtlsDriver() bool {
	for _, pattern := range []string{"/usr/lib/*/rsyslog/lmnsd_gtls.so", "/usr/lib/rsyslog/lmnsd_gtls.so", "/usr/lib64/rsyslog/lmnsd_gtls.so"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return true
		}
	}
	return false
}

// makeCerts writes a CA and a server certificate signed by it, and
// returns the global() parameters that give them to the gtls driver.
func (s *Server) makeCerts() string {
	t := s.t
	ca := tlstest.NewCA(t, "rsyslogtest CA")
	certPEM, keyPEM := ca.ServerCert(t, "localhost")
	write := func(name string, data []byte) string {
		path := filepath.Join(s.dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s.CAFile, s.CA = write("ca.pem", ca.PEM()), ca.Pool()
	return fmt.Sprintf(`
       DefaultNetstreamDriver="gtls" DefaultNetstreamDriverCAFile=%q
       DefaultNetstreamDriverCertFile=%q DefaultNetstreamDriverKeyFile=%q`,
		s.CAFile, write("cert.pem", certPEM), write("key.pem", keyPEM))
}

// start runs rsyslogd and waits until it accepts connections.
func (s *Server) start() error {
	cmd := exec.Command(s.rsyslogd, "-n", "-f", s.conf, "-i", filepath.Join(s.dir, "rsyslogd.pid"))
	exited, log, err := testenv.StartDaemon(cmd, startTimeout, func() bool {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = log
	if err != nil {
		return fmt.Errorf("%w on %s", err, s.Addr)
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// Stop stops rsyslogd as a service manager does (SIGTERM) and waits for
// it to exit: it writes out the messages it has read first.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(startTimeout):
		s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("rsyslogd did not stop on SIGTERM within %v", startTimeout)
	}
	s.cmd = nil
}

// Restart starts rsyslogd again, on the same port and files, after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	// The port may linger briefly after the stop.
	if !testenv.Eventually(startTimeout, func() bool { err = s.start(); return err == nil }) {
		s.t.Fatalf("restart rsyslogd: %v\n%s", err, s.Log())
	}
}

// Log returns what rsyslogd wrote to its stderr and of its own messages.
func (s *Server) Log() string {
	s.mu.Lock()
	out := s.log.String()
	s.mu.Unlock()
	own, _ := os.ReadFile(filepath.Join(s.dir, "rsyslogd.log"))
	return out + string(own)
}

// PID is the process id of the running rsyslogd, 0 while stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Received is one message as rsyslogd received it.
type Received struct {
	// Raw is the message (without the frame's length).
	Raw string `json:"raw"`
	// AppName, Hostname, MsgID and SD are what rsyslogd's parser found in
	// it: the header's fields and the structured data, as text.
	AppName  string `json:"app"`
	Hostname string `json:"host"`
	MsgID    string `json:"msgid"`
	SD       string `json:"sd"`
}

// Received returns every message rsyslogd has written out so far.
func (s *Server) Received() []Received {
	s.t.Helper()
	data, err := os.ReadFile(s.received)
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	var msgs []Received
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok { // none, or a line still being written
			return msgs
		}
		data = rest
		var m Received
		if err := json.Unmarshal(line, &m); err != nil {
			s.t.Fatalf("rsyslogd wrote a line that is not JSON: %v: %q", err, line)
		}
		msgs = append(msgs, m)
	}
}
