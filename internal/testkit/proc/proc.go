package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Memory returns a kB field of /proc/PID/status, such as "VmRSS" or
// "VmHWM" (peak resident memory), in bytes. Pid 0 is the calling process.
func Memory(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: parsing %q: %w", path, line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, field)
}

// CPU returns the user plus system CPU time process pid has used so far.
func CPU(pid int) (time.Duration, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	// In clock ticks: USER_HZ, which Linux fixes at 100 for user space.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// Syscalls returns how many read-like and write-like system calls
// process pid has made so far, all its threads together (syscr and syscw
// of /proc/PID/io).
func Syscalls(pid int) (reads, writes int64, err error) {
	path := fmt.Sprintf("/proc/%d/io", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		var dst *int64
		switch {
		case ok && name == "syscr":
			dst = &reads
		case ok && name == "syscw":
			dst = &writes
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(value, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: parsing %q: %w", path, line, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s has no syscr and syscw", path)
	}
	return reads, writes, nil
}

// Alive reports whether process pid exists and is not a zombie.
func Alive(pid int) bool {
	f, err := stat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// Zombie reports whether process pid has ended and waits for its parent
// to reap it.
func Zombie(pid int) bool {
	f, err := stat(pid)
	return err == nil && len(f) > 0 && f[0] == "Z"
}

// UID returns the real user id of process pid (a zombie's too).
func UID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Uid", pid)
}

// Parent returns the parent of process pid, or 0 when it cannot be read.
func Parent(pid int) int {
	f, err := stat(pid)
	if err != nil || len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// StartTime returns when process pid started, in clock ticks after boot:
// with the pid, it names the process, since a pid is reused only later.
func StartTime(pid int) (int64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseInt(f[19], 10, 64)
}

// Command returns process pid's command line, its arguments joined by
// spaces, or its name in brackets when it has none (a kernel thread, a
// zombie); "" when it cannot be read.
func Command(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err == nil && len(data) > 0 {
		return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
	}
	name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return "[" + strings.TrimSpace(string(name)) + "]"
}

// Name returns process pid's name (its executable's base name, at most 15
// bytes), or "" when it cannot be read.
func Name(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}

// Children lists the processes whose parent is pid.
func Children(pid int) []int { return children()[pid] }

// children maps every process's pid to its children's.
func children() map[int][]int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := Parent(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	return children
}

// Descendants lists every process below pid, parents before children.
func Descendants(pid int) []int {
	children := children()
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// stat returns the fields of /proc/PID/stat after the command name, which
// may hold spaces and parentheses: the state is [0], the parent [1], the
// user and system CPU ticks [11] and [12].
func stat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, data)
	}
	return strings.Fields(string(data[i+1:])), nil
}
