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

// The remote side of a run. Every command runs inside a wrapper that the
// login shell runs before the command (sshd makes the login shell a
// session leader: its pid is the command's process group and session):
//
//   - Where the host has perl on Linux, the login shell execs the
//     supervisor (see supervisor), which keeps that pid and makes itself a
//     child subreaper: every process the command starts stays its
//     descendant, also one that leaves the process group or the session
//     (setsid, a double fork), makes itself non-dumpable (ssh-agent) or
//     rewrites its arguments and environment, since an orphan is
//     reparented to the nearest subreaper, not to pid 1. Parent links,
//     start times and uids are what such a process cannot change, and
//     /proc/PID/stat shows them to anyone. The supervisor survives the
//     TERM that stops the command, stops its descendants itself, and ends
//     only when none is left, with a last line that says so. This is what
//     makes "remote_stopped" verifiable for every process of the command.
//   - The wrapper reports its pid, its start time and whether it is a
//     subreaper on the marker stream, so that the command can be stopped
//     from a second session when the server refuses "signal" requests and
//     its processes checked by what cannot be forged (see procsFunc).
//   - It puts ACTIONGW_RUN=<run id> in the command's environment. Every
//     process the command starts inherits it unless it clears or rewrites
//     its environment; where there is no supervisor, it is how processes
//     that left the group are found. Any other process of the login's uid
//     (and root's, under sudo) that started during the command and cannot
//     be shown to be someone else's makes the check unverified, by pid and
//     name (the census): an honest "cannot tell" rather than a kill of
//     what might not be ours.
//   - It arms a dead-man switch: a watcher process reads the session's
//     stdin after the command's own stdin (which it pumps to the command
//     through a FIFO), where actiongw sends a heartbeat byte every keepalive
//     interval and never an end of file. When the channel closes
//     (actiongw killed, crashed, or its connection closed by the server) or
//     no heartbeat arrives for three intervals (the network cut, where
//     `timeout` exists), it sends TERM to the command's processes (the
//     supervisor then stops its whole tree) and KILL a second later;
//     under sudo it first does both as root, through sudo, until none is
//     left (the login user cannot signal root's processes). A command
//     that ends by itself disarms it (the wrapper's EXIT trap), so what it
//     leaves running on purpose stays; a stop that the supervisor carries
//     does too ("x" on stdin). (It is killed with KILL: it ignores TERM,
//     so that a TERM to the group, which stops the command, leaves it to
//     finish the job.)
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
// terminal, and the kernel hangs the session up when sshd closes it,
// which sends HUP to the session leader: the supervisor stops its tree as
// for a TERM. A terminal session (Terminal) runs its switch in a session
// of its own instead (watchScript), which a network cut fires too, and
// its program waits until that switch is armed (awaitWatcher).
//
// What is not verified: on a host without /proc (not Linux) only the
// process group and the run id can be looked for, so a stop there is
// never verified; without the supervisor, an orphan that cleared its
// environment is found only by the census, which cannot stop it. A
// command that kills the supervisor itself (KILL, the one signal it cannot
// catch) loses it its last line, and the census decides. A command that
// attacks actiongw's own remote processes as their user (ptrace, writing
// their memory) is beyond what any of this can see.

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
// processes are readable, unless they made themselves non-dumpable);
// elsewhere: ps's environment listing.
const markedFunc = `__agw_marked() {
	if [ -r /proc/self/environ ] && printf 'a\0' | grep -qxz a 2>/dev/null; then
		grep -lsxz "ACTIONGW_RUN=@ID@" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/\([0-9]*\)/environ$#\1#'
		return 0
	fi
	__agw_ps=$(ps axeww -o pid= -o command= 2>/dev/null) || return 3
	printf '%s\n' "$__agw_ps" | awk -v m="ACTIONGW_RUN=@ID@" '{ for (i = 2; i <= NF; i++) if ($i == m) { print $1; break } }'
}
`

// procsFunc defines __agw_procs, which looks at every process of a Linux
// host in /proc/PID/stat (its parent, process group, state and start
// time) and /proc/PID/status (its uids): files that every user can read,
// also for a process that made itself non-dumpable or rewrote its
// arguments and environment. It exits 3 where there is no /proc. It reads
// the wrapper's pid (__agw_g), its start time (__agw_st, so that a reused
// pid is not taken for it), whether it is a subreaper (__agw_sub), and the
// command's process group (__agw_pg); @ID@ is the run id (see markedFunc).
//
// "__agw_procs pids" prints the live processes of the command: the
// wrapper's descendants, the command's process group and every process
// carrying the run id, without the wrapper itself when it is a subreaper (it must
// outlive them all: see supervisor). "__agw_procs check" prints them as
// "A pid comm" lines and exits 0 while there are any. When there are none,
// it exits 1 if they are all there is to see: the wrapper is a subreaper
// and still runs (every process the command started is its descendant),
// or it ended after it saw its tree empty (__agw_clean=1). Otherwise
// processes of the command may have left its tree (orphans go to pid 1),
// and it takes a census: every live process of this uid (and of the
// login's, SUDO_UID, under sudo) that started at or after the wrapper and
// is not provably someone else's, "S pid comm why" lines, exit 4; exit 1
// when there is none. Provably someone else's: its parent links, followed
// up through processes that started after the wrapper, reach one that
// started before it and is not where an orphan of ours can land: pid 1,
// or any process above the SSH server that this check shares with the
// command (which of them is a subreaper cannot be seen; SSH servers do not
// adopt orphans, and their other sessions are someone else's). A census
// needs the wrapper's start time.
//
// The check's own processes (its ancestors, the helpers its subshell
// runs) are left out. A comm may hold any byte, newlines and ")" too:
// grep -H tags each line with its file, and the fields are read after the
// file's last ")".
const procsFunc = `__agw_procs() (
	unset IFS
	[ -r /proc/self/stat ] || exit 3
	__agw_m=$(__agw_marked)
	__agw_x=$(LC_ALL=C grep -sH '' /proc/[0-9]*/stat; [ "$1" = pids ] || LC_ALL=C grep -sH '^Uid:' /proc/[0-9]*/status)
	printf '%s\n' "$__agw_x" | LC_ALL=C awk -v mode="$1" -v g="$__agw_g" -v gp="${__agw_pg:-$__agw_g}" -v gst="$__agw_st" -v isub="$__agw_sub" -v clean="${__agw_clean:-0}" -v marked=" $(echo $__agw_m) " -v sudouid="${SUDO_UID:-}" '
function parse(f, buf,    k, p, n, x, c) {
	split(f, k, "/"); p = k[3]
	if (!match(buf, /.*\)/) || substr(buf, 1, length(p) + 2) != p " (") { bad[p] = 1; return }
	n = split(substr(buf, RLENGTH + 2), x, " ")
	if (n < 20) { bad[p] = 1; return }
	c = substr(buf, length(p) + 3, RLENGTH - length(p) - 3)
	gsub(/[^ -~]/, "?", c)
	comm[p] = c; st[p] = x[1]; pp[p] = x[2]; pg[p] = x[3]; t0[p] = x[20]
}
function tree(root, set,    more, p) {
	set[root] = 1
	do { more = 0; for (p in pp) if (!(p in set) && (pp[p] in set)) { set[p] = 1; more = 1 } } while (more)
}
BEGIN {
	while ((getline s < "/proc/self/status") > 0) if (s ~ /^Uid:/) { split(s, k, /[ \t]+/); uids[k[2]] = 1 }
	if (sudouid != "") uids[sudouid] = 1
	getline s < "/proc/self/stat"
	match(s, /.*\)/); split(substr(s, RLENGTH + 2), k, " "); mypp = k[2]
}
{
	i = index($0, ":"); f = substr($0, 1, i - 1); l = substr($0, i + 1)
	if (f ~ /status$/) { if (l ~ /^Uid:/) { split(f, k, "/"); split(l, u, /[ \t]+/); ruid[k[3]] = u[2]; euid[k[3]] = u[3] } next }
	if (f == cf) { buf = buf "\n" l; next }
	if (cf != "") parse(cf, buf)
	cf = f; buf = l
}
END {
	if (cf != "") parse(cf, buf)
	for (q = pp[mypp]; (q in pp) && !(q in anc); q = pp[q]) anc[q] = 1
	tree(mypp, ex)
	for (q in anc) ex[q] = 1
	galive = (g in st) && st[g] !~ /^[ZX]/ && (gst == "" || t0[g] == gst)
	if (galive) tree(g, tr)
	alive = 0
	for (p in st) {
		if ((p in ex) || st[p] ~ /^[ZX]/ || (isub == 1 && p == g)) continue
		if (!((p in tr) || pg[p] == gp || index(marked, " " p " "))) continue
		alive++
		if (mode == "pids") print p; else print "A\t" p "\t" comm[p]
	}
	if (mode == "pids" || alive) exit alive ? 0 : 1
	if (clean == 1 || (galive && isub == 1)) exit 1
	if (gst == "") { print "S\t" g "\t?\tthe start time of the command cannot be read, so the processes it started cannot be told from others"; exit 4 }
	n = 0
	for (p in st) {
		if ((p in ex) || (p in tr) || p == g || st[p] ~ /^[ZX]/ || t0[p] + 0 < gst + 0) continue
		if (!((ruid[p] in uids) || (euid[p] in uids))) continue
		hops = 0
		for (q = pp[p]; (q in t0) && t0[q] + 0 >= gst + 0 && !(q in ex) && hops++ < 10000; q = pp[q]) ;
		if ((q in t0) && q != 1 && !((q in anc) && t0[q] + 0 < gst + 0 && comm[q] !~ /^(sshd|dropbear)/)) continue
		e = "/proc/" p "/environ"
		why = (getline v < e) < 0 ? "its environment cannot be read" : "its environment does not carry the run id"
		close(e)
		print "S\t" p "\t" comm[p] "\t" why
		n++
	}
	for (p in bad) if (!(p in ex) && ((ruid[p] in uids) || (euid[p] in uids))) { print "S\t" p "\t?\tits /proc/" p "/stat cannot be read"; n++ }
	exit n ? 4 : 1
}'
)
`

// supervisor is the perl program that becomes the wrapper where it can
// (Linux and perl, which every Debian and Ubuntu host has: perl-base is
// Essential): the login shell execs it, so that it keeps the pid that is
// the session's process group, and it makes itself a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER, by syscall number: the architecture
// comes from its own ELF header, and PR_GET_CHILD_SUBREAPER checks that
// the number was right). Every orphan of the command's processes is then
// reparented to it, not to pid 1, whatever setsid, double forks,
// non-dumpable processes or rewritten environments do: while it lives,
// the command's processes are exactly its live descendants, which
// /proc/PID/stat shows to anyone. Where it cannot become one, it execs the
// wrapper's body as the login shell would have, and says so (sub=0).
//
// Otherwise it prints its first line (\x1eactiongw-sub NONCE, the nonce
// from /dev/urandom and in no process's arguments), forks the body (the
// login shell, with sub=1; off a terminal, in a process group of its own,
// the command's) and reaps every child until the body ends. A
// command that ends by itself ends it, so what the command leaves running
// on purpose stays (and goes to pid 1); a body ended by HUP or PIPE lost
// its client, and that is a stop. A TERM, HUP (the terminal hung up),
// INT or QUIT starts a stop too: it survives it (a handler, which its
// children do not inherit, unlike an ignored signal), sends TERM to all
// its descendants, KILL after ARGV[0] (the grace) seconds and every second after, and
// ends only when it has no child left: when every process the command
// started is gone. Then it removes what the run left in $TMPDIR (see
// cleanupScript: the watcher that would have may be gone too), prints its
// last line (\x1eactiongw-reaped NONCE) and ends as the body did (the same exit status or signal). Only
// KILL can end it before that, and then its last line is missing.
const supervisor = `my ($g, $id, $sh, $b, $c) = @ARGV;
my ($n, $h, $v, $x, %m) = (0, '', pack('i', 0), '', 62, 157, 3, 172, 40, 172, 183, 167, 243, 167, 258, 167, 20, 171, 21, 171, 22, 172);
if (open my $f, '<', '/proc/self/exe') { read $f, $h, 20 }
if (length $h == 20 && substr($h, 0, 4) eq "\177ELF") {
	my $e = unpack(substr($h, 5, 1) eq "\2" ? 'n' : 'v', substr($h, 18, 2));
	$n = $m{$e} || 0;
	$n += 0x40000000 if $n && $e == 62 && substr($h, 4, 1) eq "\1";
}
unless ($n && syscall($n, 36, 1, 0, 0, 0) == 0 && syscall($n, 37, $v, 0, 0, 0) == 0 && unpack('i', $v) == 1) {
	exec {$sh} $sh, '-c', $b, 'sh', 0, $c; exit 127;
}
if (open my $r, '<', '/dev/urandom') { read $r, $x, 16 }
$x = unpack 'H*', $x;
my ($stop, $cst, $k);
sub kids {
	my (%pp, %z, %in, @k);
	opendir my $d, '/proc' or return ();
	for (readdir $d) {
		next unless /^\d+$/;
		open my $f, '<', "/proc/$_/stat" or next;
		local $/;
		my $s = <$f>;
		next unless defined $s && $s =~ /^.*\) (\S) (\d+) /s;
		$pp{$_} = $2;
		$z{$_} = $1 eq 'Z' || $1 eq 'X';
	}
	$in{$$} = 1;
	for (my $more = 1; $more;) {
		$more = 0;
		for (keys %pp) { next if $in{$_} || !$in{$pp{$_}}; $in{$_} = $more = 1; push @k, $_ unless $z{$_} }
	}
	return @k;
}
my @sigs = qw(TERM HUP INT QUIT);
$SIG{$_} = sub { return if $stop++; kill 'TERM', kids(); alarm $g } for @sigs;
$SIG{ALRM} = sub { kill 'KILL', kids(); alarm 1 };
print STDERR "\036actiongw-sub $x\n";
$k = fork;
if (!$k) {
	$SIG{$_} = 'DEFAULT' for @sigs, 'ALRM';
	setpgrp 0, 0 if defined $k && !-t STDIN;
	exec {$sh} $sh, '-c', $b, 'sh', defined $k ? 1 : 0, $c;
	exit 127;
}
for (;;) {
	my $p = waitpid -1, 0;
	last if $p < 0;
	next if $p != $k;
	$cst = $?;
	# A body that a HUP or a PIPE ended lost its client (its terminal, the
	# session its output went to): a stop, as the watcher's TERM would be,
	# which may come only after this process would have ended.
	if (!$stop && (($cst & 127) == 1 || ($cst & 127) == 13)) { $stop = 1; kill 'TERM', kids(); alarm $g }
	last unless $stop;
}
if ($stop) {
	my $t = $ENV{TMPDIR} || '/tmp';
	if (opendir my $d, $t) {
		my @f = map "$t/$_", grep /^actiongw-(?:(?:sudo|stdin)-\Q$id\E\.\w+|\Q$id\E\.in)$/, readdir $d;
		system 'rm', '-rf', '--', @f if @f;
	}
	$SIG{PIPE} = 'IGNORE';
	print STDERR "\036actiongw-reaped $x\n";
}
alarm 0;
$SIG{$_} = 'DEFAULT' for @sigs, 'ALRM', 'PIPE';
kill $cst & 127, $$ if $cst & 127;
exit(defined $cst ? $cst >> 8 : 255);
`

// wrapperScript is what the login shell runs: the command and the body
// (wrapperBody) in variables, each quoted, then the supervisor (sub, with
// perl) or, without it, the body in the login shell itself. Both hand the
// body "0" or "1" (not a subreaper, or one) and the command as its
// arguments. Put together by concatenation, not a replacer, so that the
// command and the body keep every byte.
func wrapperScript(command, body, sub string) string {
	return "__agw_cmd=" + shellQuote(command) + "\n__agw_body=" + shellQuote(body) + "\n" + sub + "set -- 0 \"$__agw_cmd\"\neval \"$__agw_body\""
}

// subLine execs the supervisor where perl exists; @G@ is its grace in
// whole seconds, @ID@ the run id.
const subLine = `command -v perl >/dev/null 2>&1 && exec perl -e @SUP@ @G@ @ID@ "${SHELL:-/bin/sh}" "$__agw_body" "$__agw_cmd"
`

// wrapperBody runs the command (@RUN@: eval of it, or under sudo: see
// sudoFunc) after @PRE@ (see prelude) with @N@ bytes of stdin; @P@ is how
// many seconds without a heartbeat fire the switch. @SETUP@ (sudo's
// function, and its password, first on stdin) comes before the watcher
// starts; @PRE@, the call's variables and directory, after it, so that
// they cannot change how the switch works: an IFS that splits its pids
// apart, a PATH that finds other tools. @ARM@ decides whether it is armed:
// __agw_a=1, and __agw_f names the FIFO that carries the command's stdin
// when it has any. Without stdin the command reads /dev/null, and arming
// costs one fork: the command's start and end wait for nothing else (a
// FIFO adds a mkfifo; its removal runs in the watcher). Its marker line
// gives the wrapper's pid (__agw_g: the supervisor's, or the login
// shell's), whether it is armed, whether it is a subreaper, its start time,
// and the command's process group (__agw_pg): the body's own (the
// supervisor makes it one, so that $$ is the group as it is without it,
// and a KILL to the group leaves the supervisor alone), or on a terminal,
// where job control keeps it in the session's, the supervisor's.
//
// The EXIT trap disarms the switch only when the command ends by itself:
// bash, unlike dash and busybox, runs it also when a signal ends the shell
// (the TERM of a stop, the watcher's own, a PIPE once the session is
// gone), and it killed the watcher then, in the middle of its stop, or
// before a stop that it alone could finish (a lost client under sudo). So
// each signal that would end the shell is trapped, to say so (__agw_k) and
// send itself again with the trap removed: the shell ends by it, as
// before, and only later, when a foreground process holds it, since a trap
// waits for that process to end (it gets the same signal: it is in the
// command's group).
const wrapperBody = `__agw_sub=$1 __agw_cmd=$2; set --
@ARM@
__agw_g=$$ __agw_pg=$$; [ "$__agw_sub" = 1 ] && __agw_g=$PPID
__agw_st=; { IFS= read -r __agw_st </proc/$__agw_g/stat; } 2>/dev/null && __agw_st=${__agw_st##*) } && set -- $__agw_st && [ $# -ge 20 ] && shift 19 && __agw_st=$1 || __agw_st=
{ IFS= read -r __agw_x </proc/$$/stat; } 2>/dev/null && __agw_x=${__agw_x##*) } && set -- $__agw_x && [ $# -ge 3 ] && __agw_pg=$3
set --
` + markedFunc + procsFunc + `@SETUP@if [ -n "$__agw_a" ]; then
	exec 3<&0
	(
		trap '' HUP INT TERM
		# KILL: the head it runs ignores TERM, as this subshell does,
		# where timeout execs it (busybox's) rather than fork it.
		` + heartbeatTimeout + `
		if [ -n "$__agw_f" ]; then
			exec 4>"$__agw_f" # returns once the command opened its end
			rm -f "$__agw_f"
			if __agw_s=$(mktemp "${TMPDIR:-/tmp}/actiongw-stdin-@ID@.XXXXXX" 2>/dev/null) && exec 5<"$__agw_s" 6>"$__agw_s" 7<"$__agw_s"; then
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
		# A heartbeat is ".", and "x" (sent once a stop began, when the
		# supervisor finishes it) disarms the switch.
		[ -z "$__agw_b" ] &&
		` + heartbeatLoop + `
		@ROOTFIRE@
		kill -TERM -$__agw_pg $__agw_g $(__agw_procs pids) $(__agw_marked) 2>/dev/null
		@FIRE@
		kill -KILL $(__agw_procs pids) $(__agw_marked) 2>/dev/null
		@CLEAN@
		[ "$__agw_sub" = 1 ] || kill -KILL -$__agw_pg 2>/dev/null
	) </dev/null >/dev/null 2>&1 &
	__agw_w=$!
	trap '[ -n "$__agw_k" ] || kill -KILL "$__agw_w" 2>/dev/null; [ -p "$__agw_f" ] && rm -f "$__agw_f"' EXIT
	for __agw_k in HUP INT QUIT PIPE TERM; do trap "__agw_k=1; trap - $__agw_k; kill -$__agw_k \"\$\$\"" $__agw_k; done
	__agw_k=
fi
printf '\036actiongw-pgid %d armed=%s sub=%s start=%s group=%s\n' "$__agw_g" "$__agw_a" "$__agw_sub" "$__agw_st" "$__agw_pg" >&2
@AWAIT@@PRE@ACTIONGW_RUN=@ID@; export ACTIONGW_RUN
if [ -n "$__agw_a" ]; then
	@RUN@ <"${__agw_f:-/dev/null}" 3<&-
else
	@RUN@
fi`

// heartbeatTimeout sets __agw_t, what bounds each heartbeat's read (to
// @P@ seconds) where `timeout` exists, and heartbeatLoop reads
// heartbeats (".") from fd 3 until one is late, the stream ends, or "x"
// stands the switch down (it exits 0 then). Shared by the wrapper's
// watcher and a terminal's (watchScript).
const (
	heartbeatTimeout = `__agw_t=; command -v timeout >/dev/null 2>&1 && __agw_t="timeout -s KILL @P@"`
	heartbeatLoop    = `while __agw_b=$($__agw_t head -c 1 <&3) && [ "$__agw_b" = . ]; do :; done
		[ "$__agw_b" = x ] && exit 0`
)

// watchScript is the dead-man switch of a terminal session, whose
// wrapper cannot arm its own (the command's stdin is the terminal): run
// in a session of its own beside the terminal's, it reads heartbeats on
// its stdin, and when they stop for deadline or its session closes
// (actiongw killed, the network cut), it sends TERM to the terminal's
// processes (w's, see killScript) and KILL a second later. It ignores
// the signals a closing session sends.
func watchScript(w wrapperInfo, runID string, deadline time.Duration) string {
	p := fmt.Sprint(int(deadline.Round(time.Second) / time.Second))
	return "trap '' HUP INT PIPE TERM\nexec 3<&0 </dev/null >/dev/null 2>&1\n" +
		strings.ReplaceAll(watcherArmed, "@ID@", runID) + "\n" +
		strings.ReplaceAll(heartbeatTimeout, "@P@", p) + "\n" + heartbeatLoop + "\n" +
		"(" + killScript("TERM", w, runID) + ")\nsleep 1\n(" + killScript("KILL", w, runID) + ")\nexit 0"
}

// arming is how a wrapper arms its dead-man switch (see wrap).
type arming int

const (
	// unarmed: the hang-up alone, as for a command on a pseudo-terminal,
	// whose stdin cannot carry heartbeats.
	unarmed arming = iota
	// armedStdin: the wrapper's own watcher reads heartbeats on stdin,
	// where the host allows (armOn, armFIFO).
	armedStdin
	// armedBeside: a terminal's. Its watcher runs in a session of its own
	// (watchScript), and the program waits for it (awaitWatcher).
	armedBeside
)

// The lines that set @ARM@: not armed; armed without stdin; armed with a
// FIFO for stdin, or not armed when it cannot be made; a terminal's,
// which makes and opens the FIFO its watcher says it is armed through
// (see awaitWatcher), or leaves __agw_wf empty when it cannot. The
// watcher reads with head: where the PATH has none, it would take the
// first read for a lost client and stop the command at once, so it is
// not armed; nor, with stdin, where there is no wc to check that all of
// stdin came.
const (
	armOff   = `__agw_a= __agw_f=`
	armOn    = `__agw_a= __agw_f=; command -v head >/dev/null 2>&1 && __agw_a=1`
	armFIFO  = `__agw_a= __agw_f="${TMPDIR:-/tmp}/actiongw-@ID@.in"; command -v head >/dev/null 2>&1 && command -v wc >/dev/null 2>&1 && mkfifo -m 600 "$__agw_f" 2>/dev/null && __agw_a=1 || __agw_f=`
	armAwait = `__agw_a= __agw_f= __agw_wf="${TMPDIR:-/tmp}/actiongw-@ID@.arm"; command -v head >/dev/null 2>&1 && mkfifo -m 600 "$__agw_wf" 2>/dev/null && exec 9<>"$__agw_wf" || __agw_wf=`
)

// awaitWatcher (@AWAIT@, a terminal's, right after its marker line)
// holds the program back until its watcher, which the gateway starts once
// that line arrived, writes "a" into the FIFO armAwait made and opened
// (watcherArmed): a network cut before then leaves nothing running that
// no watcher watches. Where timeout exists, it waits @P@ seconds at most,
// then runs nothing; a stop ends the wait as it ends a program (GNU's
// timeout puts itself and its head in a group of their own, so without
// the supervisor they outlive that stop, for @P@ seconds at most, and
// start nothing). Without the FIFO (no mkfifo or head, a $TMPDIR it
// cannot write), the program starts at once, unwatched until its watcher
// arms.
const awaitWatcher = `if [ -n "$__agw_wf" ]; then
	` + heartbeatTimeout + `
	__agw_b=$($__agw_t head -c 1 <&9)
	rm -f "$__agw_wf"; exec 9<&-
	[ "$__agw_b" = a ] || { echo 'actiongw: the dead-man switch of this session was not armed in time, so its program was not started' >&2; exit 125; }
fi
`

// watcherArmed, in watchScript once its stdin carries the heartbeats,
// tells the terminal's wrapper that its watcher is armed (awaitWatcher).
// Opened for reading and writing, the FIFO never blocks it: a wrapper
// that gave up and removed it leaves at most a file of one byte, which a
// stop's cleanupScript removes.
const watcherArmed = `__agw_wf="${TMPDIR:-/tmp}/actiongw-@ID@.arm"; [ -p "$__agw_wf" ] && printf a 1<>"$__agw_wf"`

// cleanupScript removes what a run leaves in $TMPDIR when it is stopped
// before it could: the stdin FIFO of a wrapper stopped before its watcher
// opened it, a terminal's FIFO (see awaitWatcher), the watcher's staged
// stdin, and sudo's askpass directory (see sudoFunc) of a command stopped
// while sudo ran. It runs as the login
// user, whose $TMPDIR is the wrapper's (the call's env comes later; under
// sudo, the login shell gets none of it).
func cleanupScript(runID string) string {
	return strings.ReplaceAll(`__agw_d=${TMPDIR:-/tmp}; rm -rf "$__agw_d/actiongw-@ID@.in" "$__agw_d/actiongw-@ID@.arm" "$__agw_d"/actiongw-stdin-@ID@.* "$__agw_d"/actiongw-sudo-@ID@.* 2>/dev/null
`, "@ID@", runID)
}

// What the watcher does after its TERM (@FIRE@): a supervisor (sub=1)
// finishes the stop itself, and a TERM that reached the watcher's own
// timeout (GNU's passes it on to the head it runs, as a KILL) fires it
// for nothing. Otherwise, a second later, KILL. Under sudo (@ROOTFIRE@,
// before the TERM) the watcher first stops everything as root
// (rootKillScript, with its own copy of the password): the login user
// can signal none of root's processes. Only then does the supervisor get
// its TERM, so that its KILL, a grace period later, cannot end sudo's
// askpass before sudo has read it.
const (
	fireUser = `[ "$__agw_sub" = 1 ] && exit 0
		sleep 1`
	fireSudo = `__agw_sudo sh -c @ROOTKILL@ sh "$__agw_g" "$__agw_st" "$__agw_sub" "$__agw_pg"`
)

// rootKillScript, run as root by the watcher of a command under sudo,
// TERMs the wrapper and the command's processes (see __agw_procs), then
// after a second KILLs them until none is left, a few seconds at most.
const rootKillScript = markedFunc + procsFunc + `__agw_g=$1 __agw_st=$2 __agw_sub=$3 __agw_pg=$4 __agw_i=0
kill -TERM $__agw_g $(__agw_procs pids) 2>/dev/null
sleep 1
while [ $__agw_i -lt 50 ]; do
	__agw_p=$(__agw_procs pids) || exit 0
	[ -z "$__agw_p" ] && exit 0
	kill -KILL $__agw_p 2>/dev/null
	sleep 0.1 2>/dev/null || sleep 1
	__agw_i=$((__agw_i + 1))
done
exit 0`

// wrap returns the script that runs req's command on the target; see
// wrapperScript and wrapperBody. arm says how the dead-man switch is
// armed where the host allows; deadline is how long the wrapper waits
// for the gateway: its watcher for a heartbeat, or armedBeside, the
// program for its watcher to arm. grace is how long the supervisor waits
// after a TERM before it sends KILL. With noSub, the host's perl is not
// used.
func wrap(req *Request, runID string, arm arming, deadline, grace time.Duration, noSub bool) string {
	seconds := fmt.Sprint(int(deadline.Round(time.Second) / time.Second))
	line, await := armOff, ""
	switch {
	case arm == armedBeside:
		line, await = armAwait, strings.ReplaceAll(awaitWatcher, "@P@", seconds)
	case arm == armedStdin && len(req.Stdin) > 0:
		line = armFIFO
	case arm == armedStdin:
		line = armOn
	}
	setup, pre, run, fire, rootFire := "", prelude(req.Dir, req.Env), `eval "$__agw_cmd"`, fireUser, ""
	if req.Sudo {
		// Under sudo, whose env_reset drops the environment: the run id
		// and the variables go through env, as root. The login shell gets
		// none of them, so that none changes how sudo and the password
		// are handled (a PATH that finds another sudo).
		setup, pre = sudoPrelude(req.SudoPassword, runID), prelude(req.Dir, nil)
		run = "__agw_sudo env ACTIONGW_RUN=" + runID
		for _, name := range slices.Sorted(maps.Keys(req.Env)) {
			run += " " + shellQuote(name+"="+req.Env[name])
		}
		run += ` sh -c "$__agw_cmd"`
		fire, rootFire = "", strings.Replace(fireSudo, "@ROOTKILL@", shellQuote(strings.ReplaceAll(rootKillScript, "@ID@", runID)), 1)
	}
	body := strings.NewReplacer(
		// The replacer does not look again at what it put in: the
		// line's own @ID@ (the FIFO's name) is replaced here.
		"@ARM@", strings.ReplaceAll(line, "@ID@", runID),
		"@AWAIT@", await,
		"@SETUP@", setup,
		"@PRE@", pre,
		"@RUN@", run,
		"@FIRE@", fire,
		"@ROOTFIRE@", rootFire,
		"@CLEAN@", cleanupScript(runID),
		"@ID@", runID,
		"@N@", fmt.Sprint(len(req.Stdin)),
		"@P@", seconds,
	).Replace(wrapperBody)
	sub := ""
	if !noSub {
		sub = strings.NewReplacer("@SUP@", shellQuote(supervisor), "@G@", fmt.Sprint(graceSeconds(grace)), "@ID@", runID).Replace(subLine)
	}
	return wrapperScript(req.Command, body, sub)
}

// graceSeconds is grace in whole seconds, at least one: the supervisor's
// alarm counts seconds.
func graceSeconds(grace time.Duration) int {
	return max(1, int((grace+time.Second-1)/time.Second))
}

// sudoFunc defines __agw_sudo, which runs its arguments as root under
// sudo. With a password (read into __agw_pw from stdin, never exported),
// sudo asks an askpass program that reads it from a FIFO in a private
// directory, once: a second ask (a refused password) gets nothing, so sudo
// gives up at once instead of waiting. The password is written by a
// builtin printf in a subshell, so it is in no process's arguments or
// environment. Without one, sudo -n fails at once if it needs one. The
// directory's name holds the run id (@ID@), so that a stop can remove the
// one a command stopped while sudo ran leaves behind (cleanupScript).
const sudoFunc = `__agw_sudo() {
	if [ -z "${__agw_pw+x}" ]; then
		sudo -n -- "$@"
		return
	fi
	__agw_sd=$(mktemp -d "${TMPDIR:-/tmp}/actiongw-sudo-@ID@.XXXXXX") || { echo "actiongw: cannot make a private directory for sudo's askpass" >&2; return 126; }
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

// sudoPrelude defines __agw_sudo for the run runID and, with a password,
// reads it: the first line of stdin (see sudoStdin), with the shell's own
// read. The script is the login shell's argument, which every process on
// the host can read: "head -c LEN" there told the password's length.
func sudoPrelude(password []byte, runID string) string {
	f := strings.ReplaceAll(sudoFunc, "@ID@", runID)
	if password == nil {
		return f
	}
	return "IFS= read -r __agw_pw\n" + f
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
func sudoControl(script string, password []byte, runID string) string {
	return sudoPrelude(password, runID) + "__agw_sudo sh -c " + shellQuote("("+script+"\n); exit $((10 + $?))") +
		"\n__agw_rc=$?\ncase $__agw_rc in 1[0-9]) exit $((__agw_rc - 10));; *) exit 3;; esac"
}

// heartbeatDeadline is how long the remote watcher waits for a heartbeat
// sent every interval: three intervals, and never less than a few seconds,
// since heartbeats share the connection with the command's output.
func heartbeatDeadline(interval time.Duration) time.Duration {
	return max(3*interval, 5*time.Second)
}

// wrapperInfo is what the wrapper's marker lines say about it.
type wrapperInfo struct {
	pid   int64  // the wrapper's: the supervisor's, or the login shell's; 0: unknown
	pgid  int64  // the command's process group: the wrapper's pid, or the supervisor's child's
	start string // its start time (/proc/PID/stat, clock ticks after boot); "" where unknown
	sub   bool   // it is the supervisor, a child subreaper
	nonce string // the supervisor's, on its first line and its last
}

// controlVars sets the variables __agw_procs reads (see procsFunc).
func controlVars(w wrapperInfo, runID string) string {
	sub := "0"
	if w.sub {
		sub = "1"
	}
	return strings.ReplaceAll(markedFunc+procsFunc, "@ID@", runID) +
		fmt.Sprintf("__agw_g=%d __agw_pg=%d __agw_st=%s __agw_sub=%s\n", w.pid, w.pgid, shellQuote(w.start), sub)
}

// killScript sends sig to the command's processes: its process group,
// every process that carries its run id and, on Linux, every live
// descendant of the wrapper. A supervisor gets TERM, which starts its own
// stop, but never KILL, which would end it first: its orphans would go to
// pid 1, out of sight. (The command's group is its own, except on a
// terminal, where it is the supervisor's and gets no KILL either.) It gets
// CONT instead, in case it was stopped, so that it reaps what the KILL
// ends.
func killScript(sig string, w wrapperInfo, runID string) string {
	kill := fmt.Sprintf("kill -%s -%d $__agw_p $(__agw_marked) 2>/dev/null", sig, w.pgid)
	switch {
	case w.sub && sig == "KILL" && w.pgid == w.pid:
		kill = fmt.Sprintf("kill -KILL $__agw_p $(__agw_marked) 2>/dev/null; kill -CONT %d 2>/dev/null", w.pid)
	case w.sub && sig == "KILL":
		kill += fmt.Sprintf("; kill -CONT %d 2>/dev/null", w.pid)
	case w.sub:
		kill += fmt.Sprintf("; kill -%s %d 2>/dev/null", sig, w.pid)
	}
	return controlVars(w, runID) + "__agw_p=$(__agw_procs pids 2>/dev/null)\n" + kill + "\nexit 0"
}

// aliveScript checks the command's processes (see __agw_procs check, whose
// lines it prints): it exits 0 while any of them lives, 1 when all are
// gone and nothing else could be one, 4 when processes of this host might
// be the command's and cannot be told apart (the census), 3 when this
// host's processes cannot be listed, and 5 on a host without /proc, where
// its group and run id are all that can be looked for. With clean, the
// session ended with the supervisor's last line: it saw its tree empty.
func aliveScript(w wrapperInfo, runID string, clean bool) string {
	c := "0"
	if clean {
		c = "1"
	}
	return controlVars(w, runID) + "__agw_clean=" + c + "\n" + fmt.Sprintf(`__agw_m=$(__agw_marked) || exit 3
__agw_procs check
__agw_rc=$?
[ $__agw_rc = 3 ] || exit $__agw_rc
__agw_m=$(printf '%%s' "$__agw_m" | tr '\n' ' ')
__agw_ps=$(ps -A -o pid= -o pgid= -o stat= 2>/dev/null) || exit 3
printf '%%s\n' "$__agw_ps" | awk -v g=%d -v m=" $__agw_m " '$3 !~ /^Z/ && ($2 == g || index(m, " " $1 " ")) { print "A\t" $1 "\t?"; alive = 1 } END { exit alive ? 0 : 5 }'`, w.pgid)
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
