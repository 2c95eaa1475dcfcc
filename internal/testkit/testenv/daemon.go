package testenv

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// StartDaemon starts cmd, a daemon a test runs in the foreground (sshd,
// rsyslogd), with its stdout and stderr in log, and waits at most d until
// up reports that it serves: no event says so, so up is polled. exited is
// closed when the daemon ends. One that exits during start-up, or is not
// up within d, is killed and waited for, and the error says which; log
// then holds what it wrote.
func StartDaemon(cmd *exec.Cmd, d time.Duration, up func() bool) (exited <-chan struct{}, log *syncbuf.Buffer, err error) {
	log = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, log, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	ok := false
	Eventually(d, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		ok = up()
		return ok
	})
	name := filepath.Base(cmd.Path)
	select {
	case <-done:
		return nil, log, fmt.Errorf("%s exited during start-up", name)
	default:
	}
	if !ok {
		cmd.Process.Kill()
		<-done
		return nil, log, fmt.Errorf("%s did not come up within %v", name, d)
	}
	return done, log, nil
}

// FreePort returns a loopback port nothing listens on now: for a daemon
// to listen on, or for an address that refuses connections.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
