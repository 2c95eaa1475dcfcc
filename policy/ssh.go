package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// SSH holds the rules of one SSH target: which commands and file
// transfers a call may run on it, and with which budget.
type SSH struct {
	Target   string
	Commands *Commands
	// Approve is the target's approve option (ApproveNever, ApproveUnlisted
	// or ApproveAlways).
	Approve string
	// AllowSudo lets a call run its command under sudo.
	AllowSudo bool
	// MaxCommand and MaxStdin bound a call's command and its stdin, in
	// bytes.
	MaxCommand int
	MaxStdin   int64
	// Cwd and Env are the target's defaults for a command's directory and
	// environment; Dirs the directories a command may run in (allow_cwd),
	// AllowEnv the names (path.Match globs) a call may set (allow_env).
	Cwd      string
	Dirs     *Dirs
	Env      map[string]string
	AllowEnv []string
	// SettableEnv reports whether a variable may be named so at all,
	// whatever AllowEnv says (the remote wrapper keeps some names for
	// itself); EnvNameRule says in words which names it takes. Nil takes
	// every name.
	SettableEnv func(name string) bool
	EnvNameRule string
	// Timeout is a call's timeout when it asks for none, MaxTimeout the
	// most it may ask for; OutputLimit caps a command's output (0: none).
	Timeout, MaxTimeout time.Duration
	OutputLimit         int64
	// Paths are the rules of file transfers, of at most MaxUpload and
	// MaxDownload bytes.
	Paths                  *Paths
	MaxUpload, MaxDownload int64
}

// Command is a call to run a command, as policy judges it.
type Command struct {
	Command string
	Stdin   int64 // bytes
	Sudo    bool
	// Cwd and Env are what the call asked for; "" and nil take the
	// target's.
	Cwd     string
	Env     map[string]string
	Timeout time.Duration // asked; 0: none
}

// Decide decides whether c may run on the target, and how. Its Verdict is
// the command's (its size and bytes, the allow and deny rules, approve);
// SudoErr, StdinErr, DirErr and EnvErr say whether it may run as asked.
func (r *SSH) Decide(c Command) Decision {
	d := budget(c.Timeout, r.Timeout, r.MaxTimeout)
	d.OutputLimit = r.OutputLimit
	switch {
	case len(c.Command) > r.MaxCommand:
		// Sizes and bytes first: one call must not flood the audit log,
		// nor reach the connection with what makes sshd drop it.
		d.deny(&LimitError{"max_command_bytes", "command too long",
			fmt.Sprintf("the command is %d bytes; target %q accepts at most %d (max_command_bytes)", len(c.Command), r.Target, r.MaxCommand)})
	case strings.IndexByte(c.Command, 0) >= 0:
		d.deny(&LimitError{"command", "NUL byte in the command", "the command contains a NUL byte, which no shell command can hold"})
	default:
		listed, err := r.Commands.Listed(c.Command)
		switch {
		case err != nil:
			d.deny(err)
		case !listed && r.Approve == ApproveNever:
			d.deny(r.Commands.Check(c.Command)) // the allow list's denial
		case !listed || r.Approve == ApproveAlways:
			d.ask(RuleApprove)
		}
	}
	if c.Sudo && !r.AllowSudo {
		d.SudoErr = &DeniedError{Target: r.Target, Rule: "allow_sudo", Reason: "sudo is not allowed on this target"}
	}
	d.Sudo = c.Sudo && r.AllowSudo
	if c.Stdin > r.MaxStdin {
		d.StdinErr = &LimitError{"max_stdin_bytes", "stdin too large",
			fmt.Sprintf("stdin is %d bytes; target %q accepts at most %d (max_stdin_bytes)", c.Stdin, r.Target, r.MaxStdin)}
	}
	d.Dir, d.DirErr = r.dir(c.Cwd)
	d.Env, d.EnvErr = r.env(c.Env)
	return d
}

// dir is the directory a command runs in: the call's cwd, else the
// target's, as allow_cwd lets it be (Dirs decides and cleans it, or
// denies).
func (r *SSH) dir(cwd string) (string, error) {
	if len(cwd) > MaxCwdBytes || strings.IndexByte(cwd, 0) >= 0 {
		return "", &LimitError{"cwd", "cwd too long or with a NUL byte",
			fmt.Sprintf("cwd must be at most %d bytes, with no NUL byte", MaxCwdBytes)}
	}
	if cwd == "" {
		cwd = r.Cwd
	}
	return r.Dirs.Check(cwd)
}

// env is the environment a command runs with: the target's, with the
// call's on top. The call may set only the names AllowEnv allows (a
// denial); sizes and bytes are bounded as in the config.
func (r *SSH) env(callEnv map[string]string) (map[string]string, error) {
	if len(callEnv) == 0 {
		return r.Env, nil
	}
	env := maps.Clone(r.Env)
	if env == nil {
		env = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(callEnv)) {
		v := callEnv[name]
		switch {
		case r.SettableEnv != nil && !r.SettableEnv(name):
			return nil, &LimitError{"env", "bad variable name",
				fmt.Sprintf("env: %q is not a variable name that can be set (%s)", clipDots(name, 64), r.EnvNameRule)}
		case !slices.ContainsFunc(r.AllowEnv, func(p string) bool { ok, _ := path.Match(p, name); return ok }):
			return nil, &DeniedError{Target: r.Target, Rule: "allow_env",
				Reason: fmt.Sprintf("env %s is not among the variables a call may set (allow_env %q): a variable can change what a command does", clipDots(name, 64), r.AllowEnv)}
		case len(v) > MaxEnvValueBytes || strings.IndexByte(v, 0) >= 0:
			return nil, &LimitError{"env", "env value too long or with a NUL byte",
				fmt.Sprintf("env %s: the value must be at most %d bytes, with no NUL byte", name, MaxEnvValueBytes)}
		}
		env[name] = v
	}
	if len(env) > MaxEnv {
		return nil, &LimitError{"env", "too many variables", fmt.Sprintf("env: at most %d variables, with the target's, got %d", MaxEnv, len(env))}
	}
	return env, nil
}

// Transfer is a call to move a file, as policy judges it.
type Transfer struct {
	// Path is the remote path asked for: absolute, or relative to the
	// login directory.
	Path string
	// Upload is set for an upload of Size bytes; else it is a download.
	Upload  bool
	Size    int64
	Timeout time.Duration // asked; 0: none
}

// DecideTransfer decides whether t may move a file. A path is refused
// before anything is dialled when it is too long or holds a NUL byte, or,
// when it is absolute, when the path rules deny it as asked; the path the
// server resolves it to is checked again (Paths.Check) during the
// transfer.
func (r *SSH) DecideTransfer(t Transfer) Decision {
	d := budget(t.Timeout, r.Timeout, r.MaxTimeout)
	d.MaxBytes = r.MaxDownload
	if t.Upload {
		d.MaxBytes = r.MaxUpload
		if t.Size > r.MaxUpload {
			d.deny(&LimitError{"max_upload_bytes", "upload too large",
				fmt.Sprintf("the upload is %d bytes; target %q accepts at most %d (max_upload_bytes)", t.Size, r.Target, r.MaxUpload)})
			return d
		}
	}
	p := t.Path
	switch {
	case p == "":
		d.deny(&LimitError{"path", "empty path", "path is empty: give the remote file's path"})
	case len(p) > MaxPathBytes || strings.IndexByte(p, 0) >= 0:
		d.deny(&LimitError{"path", "path too long or with a NUL byte",
			fmt.Sprintf("path must be at most %d bytes, with no NUL byte", MaxPathBytes)})
	case path.IsAbs(p):
		if err := r.Paths.Check(path.Clean(p)); err != nil {
			d.deny(err)
		}
	case len(r.Paths.Allow) == 0:
		d.deny(r.Paths.Check("/")) // transfers are off: says so
	}
	return d
}
