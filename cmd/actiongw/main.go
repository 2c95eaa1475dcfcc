package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/actiongw/actiongw/internal/config"
)

// version is what serve reports as its serverInfo.version and `actiongw
// version` prints first: set at build time with -ldflags "-X
// main.version=…" (a release build, .goreleaser.yaml), else init takes the
// module version the go command recorded. It is never empty.
var version string

// commit and date are the release build's revision and build time, set with
// -ldflags "-X main.commit=… -X main.date=…" beside version. Empty in other
// builds, where `actiongw version` shows what the go command stamped.
var commit, date string

func init() {
	info, _ := debug.ReadBuildInfo()
	version = moduleVersion(version, info)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	err := c.run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(c.stderr, err))
}

// usageError marks an error in how the command was called (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitCode prints err and decides the exit status: 0 ok, 2 usage, 1 else.
func exitCode(stderr io.Writer, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "actiongw: %v\n", err)
	var uerr *usageError
	if errors.As(err, &uerr) {
		fmt.Fprintln(stderr, "run 'actiongw help' for usage")
		return 2
	}
	return 1
}

// cli holds what a command may touch of its process, so tests can run
// commands in-process.
type cli struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

const usage = `actiongw runs SSH commands and HTTP calls for an AI agent over MCP (stdio),
with credentials kept in the OS keyring.

Usage:
  actiongw demo                     try it: a built-in sandbox driven over MCP (nothing to set up)
  actiongw serve [-config PATH]     serve MCP on stdin/stdout
  actiongw serve -demo              serve the built-in sandbox to any MCP client
  actiongw secret set NAME          store a secret (no-echo prompt, or stdin)
  actiongw secret delete NAME       remove a secret
  actiongw secret list [-config P]  names the config references, present or not
  actiongw check [-config PATH]     validate config, secrets and targets
  actiongw ca init NAME             an SSH certificate authority key in the keyring,
                                    for targets with ca_secret (per-action certificates)
  actiongw import ssh-config [-hosts PATTERN] [-write]
                                    targets from ~/.ssh/config, keys into the keyring
  actiongw audit verify [-config P] check the audit log's hash chain
  actiongw audit tail [-n N] [-f]   print recent audit records
  actiongw audit seal [-config P]   move a damaged audit log aside, start a new chain
  actiongw console [-config P] [-listen ADDR] [-open]
                                    the person's console: every serve live in a
                                    loopback web page, approvals, stop, the audit
  actiongw version                  print the version
  actiongw help                     print this help

Config: -config PATH, else $ACTIONGW_CONFIG, else
$XDG_CONFIG_HOME/actiongw/config.toml (~/.config/actiongw/config.toml).
`

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage)
		return &usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return c.serve(ctx, rest)
	case "demo":
		return c.demo(ctx, rest)
	case "secret":
		return c.secret(ctx, rest)
	case "check":
		return c.check(ctx, rest)
	case "ca":
		return c.ca(ctx, rest)
	case "audit":
		return c.audit(ctx, rest)
	case "console":
		return c.console(ctx, rest)
	case "import":
		return c.importCmd(ctx, rest)
	case "version":
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintf(c.stdout, "actiongw %s\n", versionString(version, commit, date, info))
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, usage)
		return nil
	}
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// flags returns a FlagSet for one subcommand whose errors go to stderr and
// come back as usage errors.
func (c *cli) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: actiongw %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// configFlag adds the -config flag that every command reading the config
// takes.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "config file (default $ACTIONGW_CONFIG, else $XDG_CONFIG_HOME/actiongw/config.toml)")
}

// parseConfig adds -config to fs, parses args (no positional ones) and
// loads the config it names, as the commands that only read it do.
func (c *cli) parseConfig(fs *flag.FlagSet, args []string) (*config.Config, error) {
	configPath := configFlag(fs)
	if err := parse(fs, args, 0); err != nil {
		return nil, err
	}
	return c.loadConfig(*configPath)
}

// parse parses args and turns a flag error into a usage error.
func parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > maxArgs {
		return &usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(maxArgs))}
	}
	return nil
}

// loadConfig loads the config at path, or at the default lookup path.
func (c *cli) loadConfig(path string) (*config.Config, error) {
	if path == "" {
		path = config.DefaultPath(c.getenv)
	}
	cfg, err := config.Load(path)
	if err == nil {
		for _, w := range cfg.Warnings {
			newLogger(c.stderr, "warn").Warn(w, "path", path)
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no config at %s (create one from config.example.toml, or pass -config PATH)", path)
	}
	if fi, serr := os.Stat(path); err == nil && serr == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o044 != 0 {
		// It holds no credential, but it maps the person's hosts and APIs.
		newLogger(c.stderr, "warn").Warn("the config file is readable by other users; it names your targets and keyring items (never their values): chmod 600 it",
			"path", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	return cfg, err
}

// newLogger returns the JSON logger on stderr at the config's level.
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// moduleVersion is override, else the module version of the build info
// ("(devel)" when the go command knew none), else "(unknown)".
func moduleVersion(override string, info *debug.BuildInfo) string {
	switch {
	case override != "":
		return override
	case info != nil && info.Main.Version != "":
		return info.Main.Version
	}
	return "(unknown)"
}

// versionString describes the build: version v, then the revision (the
// release build's commit, else the go command's VCS stamp), whether the tree
// had changes, the commit time and the build date, when known.
func versionString(v, commit, date string, info *debug.BuildInfo) string {
	settings := map[string]string{}
	if info != nil {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	if commit == "" {
		commit = settings["vcs.revision"]
	}
	var parts []string
	if commit != "" {
		parts = append(parts, "revision "+commit)
	}
	if settings["vcs.modified"] == "true" {
		parts = append(parts, "with uncommitted changes")
	}
	if t := settings["vcs.time"]; t != "" {
		parts = append(parts, "committed "+t)
	}
	if date != "" {
		parts = append(parts, "built "+date)
	}
	switch {
	case info == nil && len(parts) == 0:
		return v + " (no build information)"
	case info == nil:
		return fmt.Sprintf("%s (%s)", v, strings.Join(parts, ", "))
	case len(parts) == 0:
		parts = append(parts, "no VCS information")
	}
	return fmt.Sprintf("%s (%s; %s)", v, strings.Join(parts, ", "), info.GoVersion)
}
