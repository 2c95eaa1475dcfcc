//go:build !unix

package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/crypto/ssh"
)

// sshServer needs Unix sessions and process groups to run and stop
// commands; elsewhere the sandbox does not start.
type sshServer struct{}

func startSSH(ssh.Signer, string, ssh.PublicKey, *slog.Logger) (*sshServer, error) {
	return nil, fmt.Errorf("demo ssh server: %w: it runs commands in Unix process groups", errors.ErrUnsupported)
}

func (*sshServer) addr() *net.TCPAddr { return nil }

func (*sshServer) close() {}

// GroupAlive reports false: no sandbox command runs on this system.
func GroupAlive(int) bool { return false }
