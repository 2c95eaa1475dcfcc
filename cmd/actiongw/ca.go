package main

import (
	"context"
	"fmt"

	"github.com/actiongw/actiongw/secrets"
	"github.com/actiongw/actiongw/sshexec"
)

const caUsage = `Usage:
  actiongw ca init NAME   make an SSH certificate authority key in the OS keyring

A target with ca_secret = "NAME" then logs in, for every action, with a new key
and a certificate this CA signs for that action alone: its command as the
force-command, the target's user as principal, the handle as key id, valid for
cert_ttl. init prints the line to put in the hosts' TrustedUserCAKeys file. It
never replaces an existing CA key: every host that trusts it would have to
change.
`

// ca runs `actiongw ca init`.
func (c *cli) ca(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, caUsage)
		return &usageError{"ca: no subcommand given"}
	}
	switch args[0] {
	case "init":
		return c.caInit(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, caUsage)
		return nil
	}
	return &usageError{fmt.Sprintf("ca: unknown subcommand %q (want init)", args[0])}
}

func (c *cli) caInit(ctx context.Context, args []string) error {
	fs := c.flags("ca init", "ca init NAME")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"ca init: want a NAME"}
	}
	name := fs.Arg(0)
	if err := secrets.CheckUserName(name); err != nil {
		return &usageError{fmt.Sprintf("ca init: %v", err)}
	}
	kr := c.keyring()
	switch present, err := kr.Present(ctx, name); {
	case err != nil:
		return fmt.Errorf("ca init: %w", err)
	case present:
		return fmt.Errorf("ca init: the keyring already holds an item %q; init never replaces one (the hosts that trust a CA would refuse its new key): choose another NAME, or remove it first with: actiongw secret delete %s", name, name)
	}
	private, public, err := sshexec.NewCA("actiongw-ca-" + name)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	defer clear(private)
	if err := kr.Set(ctx, name, private); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	fmt.Fprintf(c.stdout, `stored the SSH CA key %q in the OS keyring

On each host, put this line in the file sshd_config's TrustedUserCAKeys names
(for example: TrustedUserCAKeys /etc/ssh/actiongw_ca.pub), then reload sshd:

%s
If sshd_config sets AuthorizedPrincipalsFile (for example
/etc/ssh/principals/%%u), the file of each target's user must hold a line with
that user's name (the certificates' only principal):

USER

Then give the targets ca_secret = %q (instead of key_secret or password_secret)
and run actiongw check: it logs in with a certificate forced to "true".
`, name, public, name)
	return nil
}
