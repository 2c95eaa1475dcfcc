package sshexec

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The remote side of a run. Every command runs inside a wrapper script that
// the login shell (sshd makes it a session leader, so its pid is the
// command's process group) runs before the command:
//
//   - It reports that process group on the marker stream, so the command can
//     be stopped from a second session when the server refuses "signal"
//     requests.
//   - It puts ACTIONGW_RUN=<run id> in the command's environment. Every
//     process the command starts inherits it, also those that leave the
//     process group or the session (setsid, daemons), so that a stop can
//     find and kill them, and "remote_stopped" can be verified for all of
//     them, not only for the group.
//   - It arms a dead-man switch: a watcher process reads the session's
//     stdin after the command's own stdin (which it pumps to the command
//     through a FIFO), where actiongw sends a heartbeat byte every keepalive
//     interval and never an end of file. When the channel closes
//     (actiongw killed, crashed, or its connection closed by the server) or
//     no heartbeat arrives for three intervals (the network cut, where
//     `timeout` exists), it kills the command's process group and every
//     process carrying the run id. A command that ends by itself disarms it
//     (the wrapper's EXIT trap), so what it leaves running on purpose
//     stays. (It is killed with KILL: it ignores TERM, so that a TERM to
//     the group, which stops the command, leaves it to finish the job.)
//
// A command with stdin needs mkfifo (its stdin is pumped through a FIFO
// in $TMPDIR); without it the command runs unarmed, reading the session's
// stdin directly, and the marker says so. The watcher first stages the
// stdin in a private temporary file, unlinked once open, and a process of
// its own feeds the FIFO from it: pumped straight into the FIFO, a stdin
// larger than a pipe that the command never reads held the watcher in the
// write, away from the session, and the command outlived a killed
// actiongw. A stdin that cannot be staged whole (a full $TMPDIR) fires
// the switch rather than feed the command part of it, and so does one
// that stops arriving for the heartbeat deadline (where `timeout` exists,
// and, for a stdin over 256 KiB, head is GNU's).
// On a pseudo-terminal it is never armed: the command's stdin stays the
// terminal, and the kernel hangs the session up when sshd closes it.

// runIDBytes is the entropy of a run id: unguessable, so no other process
// can carry it by accident or be made to.
const runIDBytes = 16

var runIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func newRunID() string {
	b := make([]byte, runIDBytes)
	rand.Read(b) // never fails; see crypto/rand
	return strings.ToLower(runIDEncoding.EncodeToString(b))
}

// markedFunc defines __agw_marked, which prints the pids of the processes
// whose environment holds ACTIONGW_RUN=<id>, and exits 3 when it cannot
// list the processes of this host. Linux: /proc/PID/environ (our own
// processes are readable); elsewhere: ps's environment listing.
const markedFunc = `__agw_marked() {
	if [ -r /proc/self/environ ] && printf 'a\0' | grep -qxz a 2>/dev/null; then
		grep -lsxz "ACTIONGW_RUN=@ID@" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/\([0-9]*\)/environ$#\1#'
		return 0
	fi
	__agw_ps=$(ps axeww -o pid= -o command= 2>/dev/null) || return 3
	printf '%s\n' "$__agw_ps" | awk -v m="ACTIONGW_RUN=@ID@" '{ for (i = 2; i <= NF; i++) if ($i == m) { print $1; break } }'
}
`

// wrapperScript runs @RUN@ (the command, shell-quoted, through eval, or
// under sudo: see sudoFunc) after @PRE@ (see prelude) with @N@ bytes of
// stdin; @P@ is how many seconds without a heartbeat fire the switch.
// @SETUP@ (sudo's function, and its password, first on stdin) comes before
// the watcher starts; @PRE@, the call's variables and directory, after it,
// so that they cannot change how the switch works: an IFS that splits its
// pids apart, a PATH that finds other tools. @ARM@
// decides whether it is armed: __agw_a=1, and __agw_f names the FIFO that
// carries the command's stdin when it has any. Without stdin the command
// reads /dev/null, and arming costs one fork: the command's start and end
// wait for nothing else (a FIFO adds a mkfifo; its removal runs in the
// watcher).
const wrapperScript = `@ARM@
printf '\036actiongw-pgid %d %s\n' "$$" "${__agw_a:+armed}" >&2
` + markedFunc + `@SETUP@if [ -n "$__agw_a" ]; then
	exec 3<&0
	(
		trap '' HUP INT TERM
		# KILL: the head it runs ignores TERM, as this subshell does,
		# where timeout execs it (busybox's) rather than fork it.
		__agw_t=; command -v timeout >/dev/null 2>&1 && __agw_t="timeout -s KILL @P@"
		if [ -n "$__agw_f" ]; then
			exec 4>"$__agw_f" # returns once the command opened its end
			rm -f "$__agw_f"
			if __agw_s=$(mktemp "${TMPDIR:-/tmp}/actiongw-stdin.XXXXXX" 2>/dev/null) && exec 5<"$__agw_s" 6>"$__agw_s" 7<"$__agw_s"; then
				rm -f "$__agw_s"
				# All of stdin or none: the part a lost client sent (a
				# script cut mid-line) never reaches the command, which
				# waits on the open FIFO until the switch stops it. Read
				# in parts, each within the heartbeat deadline, so that a
				# network cut (nothing arrives, nothing closes) fires it
				# too. Only GNU's head reads no more than it was asked
				# for: busybox's and BSD's read ahead through stdio, and
				# the next part would miss what they took, so there
				# stdin is one part, read without a deadline.
				__agw_n=@N@ __agw_c=262144 __agw_u=$__agw_t
				if [ $__agw_n -gt $__agw_c ] && ! { head --version 2>/dev/null | grep -q 'GNU coreutils'; }; then
					__agw_c=$__agw_n __agw_u=
				fi
				while [ $__agw_n -gt 0 ]; do
					[ $__agw_n -lt $__agw_c ] && __agw_c=$__agw_n
					$__agw_u head -c $__agw_c <&3 >&6 || break
					__agw_n=$((__agw_n - __agw_c))
				done
				[ $__agw_n = 0 ] && [ $(wc -c <&7) = @N@ ] || __agw_b=lost
				exec 6>&- 7<&-
				if [ -z "$__agw_b" ]; then cat <&5 >&4 & exec 4>&-; fi
				exec 5<&-
			else
				head -c @N@ <&3 >&4
				exec 4>&-
			fi
		fi
		[ -z "$__agw_b" ] &&
		while __agw_b=$($__agw_t head -c 1 <&3) && [ -n "$__agw_b" ]; do :; done
		kill -TERM -$$ $(__agw_marked) 2>/dev/null
		sleep 1
		kill -KILL $(__agw_marked) 2>/dev/null
		@ROOTKILL@
		kill -KILL -$$ 2>/dev/null
	) </dev/null >/dev/null 2>&1 &
	__agw_w=$!
	trap 'kill -KILL "$__agw_w" 2>/dev/null; [ -p "$__agw_f" ] && rm -f "$__agw_f"' EXIT
fi
@PRE@ACTIONGW_RUN=@ID@; export ACTIONGW_RUN
if [ -n "$__agw_a" ]; then
	@RUN@ <"${__agw_f:-/dev/null}" 3<&-
else
	@RUN@
fi`

// The lines that set @ARM@: not armed; armed without stdin; armed with a
// FIFO for stdin, or not armed when it cannot be made. The watcher reads
// with head: where the PATH has none, it would take the first read for a
// lost client and stop the command at once, so it is not armed; nor,
// with stdin, where there is no wc to check that all of stdin came.
const (
	armOff  = `__agw_a= __agw_f=`
	armOn   = `__agw_a= __agw_f=; command -v head >/dev/null 2>&1 && __agw_a=1`
	armFIFO = `__agw_a= __agw_f="${TMPDIR:-/tmp}/actiongw-@ID@.in"; command -v head >/dev/null 2>&1 && command -v wc >/dev/null 2>&1 && mkfifo -m 600 "$__agw_f" 2>/dev/null && __agw_a=1 || __agw_f=`
)

// wrap returns the script that runs req's command on the target; see
// wrapperScript. With arm, the dead-man switch is armed where the host
// allows; deadline is how long its watcher waits for a heartbeat.
func wrap(req *Request, runID string, arm bool, deadline time.Duration) string {
	line := armOff
	switch {
	case arm && len(req.Stdin) > 0:
		line = armFIFO
	case arm:
		line = armOn
	}
	quoted := shellQuote(req.Command)
	setup, pre, run, rootKill := "", prelude(req.Dir, req.Env), "eval "+quoted, ":"
	if req.Sudo {
		// Under sudo, whose env_reset drops the environment: the run id
		// and the variables go through env, as root. The login shell gets
		// none of them, so that none changes how sudo and the password
		// are handled (a PATH that finds another sudo).
		setup, pre = sudoPrelude(req.SudoPassword), prelude(req.Dir, nil)
		run = "__agw_sudo env ACTIONGW_RUN=" + runID
		for _, name := range slices.Sorted(maps.Keys(req.Env)) {
			run += " " + shellQuote(name+"="+req.Env[name])
		}
		run += " sh -c " + quoted
		// The switch's user cannot kill root's processes: it kills them
		// through sudo too, with its own copy of the password.
		rootKill = "__agw_sudo sh -c " + shellQuote(strings.ReplaceAll(markedFunc, "@ID@", runID)+"kill -KILL $(__agw_marked) 2>/dev/null; exit 0")
	}
	return strings.NewReplacer(
		// The replacer does not look again at what it put in: the
		// line's own @ID@ (the FIFO's name) is replaced here.
		"@ARM@", strings.ReplaceAll(line, "@ID@", runID),
		"@SETUP@", setup,
		"@PRE@", pre,
		"@RUN@", run,
		"@ROOTKILL@", rootKill,
		"@ID@", runID,
		"@N@", fmt.Sprint(len(req.Stdin)),
		"@P@", fmt.Sprint(int(deadline.Round(time.Second)/time.Second)),
	).Replace(wrapperScript)
}

// sudoFunc defines __agw_sudo, which runs its arguments as root under
// sudo. With a password (read into __agw_pw from stdin, never exported),
// sudo asks an askpass program that reads it from a FIFO in a private
// directory, once: a second ask (a refused password) gets nothing, so sudo
// gives up at once instead of waiting. The password is written by a
// builtin printf in a subshell, so it is in no process's arguments or
// environment. Without one, sudo -n fails at once if it needs one.
const sudoFunc = `__agw_sudo() {
	if [ -z "${__agw_pw+x}" ]; then
		sudo -n -- "$@"
		return
	fi
	__agw_sd=$(mktemp -d "${TMPDIR:-/tmp}/actiongw-sudo.XXXXXX") || { echo "actiongw: cannot make a private directory for sudo's askpass" >&2; return 126; }
	mkfifo -m 600 "$__agw_sd/pw" || { rm -rf "$__agw_sd"; echo 'actiongw: sudo needs mkfifo on the target' >&2; return 126; }
	printf '#!/bin/sh\n[ -e "$0.used" ] && exit 1\n: > "$0.used"\nexec cat %s\n' "'$__agw_sd/pw'" > "$__agw_sd/askpass"
	chmod 700 "$__agw_sd/askpass"
	( printf '%s\n' "$__agw_pw" > "$__agw_sd/pw" ) 2>/dev/null &
	__agw_sw=$!
	unset __agw_pw # the writer has its copy; the command's shell has none
	SUDO_ASKPASS="$__agw_sd/askpass" sudo -A -k -- "$@"
	__agw_sr=$?
	kill "$__agw_sw" 2>/dev/null
	rm -rf "$__agw_sd"
	return "$__agw_sr"
}
`

// sudoPrelude defines __agw_sudo and, with a password, reads it: the
// first line of stdin (see sudoStdin), with the shell's own read. The
// script is the login shell's argument, which every process on the host
// can read: "head -c LEN" there told the password's length.
func sudoPrelude(password []byte) string {
	if password == nil {
		return sudoFunc
	}
	return "IFS= read -r __agw_pw\n" + sudoFunc
}

// sudoStdin is what comes first on the stdin of a script that starts
// with sudoPrelude: the password and a newline (it has none: see
// Request.Sudo), or nothing without one.
func sudoStdin(password []byte) []byte {
	if password == nil {
		return nil
	}
	return append(slices.Clip(password), '\n')
}

// sudoControl runs a control script (see killScript, aliveScript) as
// root, for a command that runs under sudo: the password is sent on its
// stdin. Its exit status comes back as 10 plus the script's, so that a
// sudo that failed (1) is not taken for the script's answer: 3, cannot
// tell, unless the script ran.
func sudoControl(script string, password []byte) string {
	return sudoPrelude(password) + "__agw_sudo sh -c " + shellQuote("("+script+"\n); exit $((10 + $?))") +
		"\n__agw_rc=$?\ncase $__agw_rc in 1[0-9]) exit $((__agw_rc - 10));; *) exit 3;; esac"
}

// heartbeatDeadline is how long the remote watcher waits for a heartbeat
// sent every interval: three intervals, and never less than a few seconds,
// since heartbeats share the connection with the command's output.
func heartbeatDeadline(interval time.Duration) time.Duration {
	return max(3*interval, 5*time.Second)
}

// killScript sends sig to the command's process group and to every process
// that carries its run id, and removes the run's stdin FIFO: a wrapper
// stopped before its watcher opened the FIFO (which the watcher then
// removes) leaves it in $TMPDIR, which is the login's here as it was when
// the wrapper made it (the call's env comes later).
func killScript(sig string, pgid int64, runID string) string {
	return strings.ReplaceAll(markedFunc, "@ID@", runID) +
		fmt.Sprintf("kill -%s -%d $(__agw_marked) 2>/dev/null; rm -f \"${TMPDIR:-/tmp}/actiongw-%s.in\"; exit 0", sig, pgid, runID)
}

// aliveScript exits 0 while the command's process group, or any process
// carrying its run id, has a live process (not a zombie: orphans wait for
// their new parent to reap them, and some init processes take their
// time); 1 when all are gone; 3 when this host's processes cannot be
// listed, so nothing can be verified.
func aliveScript(pgid int64, runID string) string {
	return strings.ReplaceAll(markedFunc, "@ID@", runID) + fmt.Sprintf(`__agw_m=$(__agw_marked) || exit 3
__agw_m=$(printf '%%s' "$__agw_m" | tr '\n' ' ')
__agw_ps=$(ps -A -o pid= -o pgid= -o stat= 2>/dev/null) || exit 3
printf '%%s\n' "$__agw_ps" | awk -v g=%d -v m=" $__agw_m " '$3 !~ /^Z/ && ($2 == g || index(m, " " $1 " ")) { alive = 1 } END { exit !alive }'`, pgid)
}

// envName is a shell variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvNameRule says in words which names SettableEnv allows.
const EnvNameRule = "letters, digits and _, not starting with a digit, ACTIONGW_ or __agw_"

// SettableEnv reports whether an environment variable set for a command
// may be called name: a shell variable name that is none of the
// wrapper's own, ACTIONGW_* (the run id) and __agw_* (its state, set
// before the command's variables: one of the same name would override
// it, and make the watcher write to and remove a file of the caller's
// choosing, or not arm the dead-man switch).
func SettableEnv(name string) bool {
	return envName.MatchString(name) && !strings.HasPrefix(name, "ACTIONGW_") && !strings.HasPrefix(name, "__agw_")
}

// DirExitStatus is the exit status of a run whose directory could not be
// entered: the command did not run.
const DirExitStatus = 125

// prelude sets env (names checked by checkCommand, values quoted) and
// enters dir before the command, in a stable order. A directory that
// cannot be entered ends the run with DirExitStatus.
func prelude(dir string, env map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s=%s; export %s\n", name, shellQuote(env[name]), name)
	}
	if dir != "" {
		q := shellQuote(dir)
		fmt.Fprintf(&b, "cd -- %s 2>/dev/null || { printf 'actiongw: cannot enter the directory %%s; the command did not run\\n' %s >&2; exit %d; }\n", q, q, DirExitStatus)
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
