package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/secrets"
)

// TestJumpOnly: a bastion configured jump_only carries the connections of
// the targets that jump through it, and is no target itself: a prompt-
// injected agent can run no command on it, by name or by glob, and move
// no file to or from it, though its login could.
func TestJumpOnly(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	text := fmt.Sprintf("[server]\nstate_dir = %q\n", t.TempDir())
	for _, tc := range []struct{ name, extra string }{
		{"bastion", "jump_only = true\nallow_paths = [\"/**\"]"},
		{"web", "jump = \"bastion\""},
	} {
		text += fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\n%s\n",
			tc.name, s.Host, s.Port, s.User, s.KnownHosts, tc.extra)
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	gw := New(context.Background(), Options{Config: cfg, Secrets: secrets.Memory{"box-key": s.ClientKey}})
	t.Cleanup(func() { gw.Close() })
	ctx, dir := context.Background(), s.UserDir(t)

	r := gw.SSHExec(ctx, SSHExecInput{Target: "web", Command: "echo through-the-bastion"}, nil)
	if out, ok := r.Structured.(*SSHExecOutput); r.IsError || !ok || out.Status != StatusExited || !strings.Contains(out.Stdout.Head, "through-the-bastion") {
		t.Fatalf("ssh_exec on the target behind the bastion: %s; want it run through the bastion", r.Text)
	}
	for name, r := range map[string]*ToolResult{
		"ssh_exec":              gw.SSHExec(ctx, SSHExecInput{Target: "bastion", Command: "id"}, nil),
		"ssh_download":          gw.SSHDownload(ctx, SSHDownloadInput{Target: "bastion", Path: "/etc/passwd"}, nil),
		"ssh_upload":            gw.SSHUpload(ctx, SSHUploadInput{Target: "bastion", Path: dir + "/planted", Content: new("x")}, nil),
		"ssh_exec_many by name": gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"web", "bastion"}, Command: "id"}, nil),
	} {
		if !r.IsError || !strings.Contains(r.Text, "jump host only") {
			t.Errorf("%s on the bastion: %q; want it refused as a jump host only", name, r.Text)
		}
	}
	if r := gw.SSHExec(ctx, SSHExecInput{Target: "nosuch", Command: "id"}, nil); !r.IsError || strings.Contains(r.Text, "bastion") {
		t.Errorf("ssh_exec on an unknown target: %q; want the targets listed without the bastion", r.Text)
	}
	r = gw.SSHExecMany(ctx, SSHExecManyInput{Targets: []string{"*"}, Command: "true"}, nil)
	if out, ok := r.Structured.(*SSHExecManyOutput); r.IsError || !ok || out.Summary.Targets != 1 || out.Handles["web"] == "" {
		t.Errorf("ssh_exec_many on *: %s; want web alone", r.Text)
	}
}
