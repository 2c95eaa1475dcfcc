package owner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ID identifies a process for as long as it runs: its pid and, where the
// system tells, its start time, so that a pid reused by another process is
// not taken for it. The zero ID is no process.
type ID string

// Self is the ID of this process.
func Self() ID { return self }

var self = idOf(os.Getpid())

func idOf(pid int) ID {
	if start := startTime(pid); start != "" {
		return ID(fmt.Sprintf("%d.%s", pid, start))
	}
	return ID(strconv.Itoa(pid))
}

// Pid is the process id in id, or 0.
func (id ID) Pid() int {
	s, _, _ := strings.Cut(string(id), ".")
	n, _ := strconv.Atoi(s)
	return n
}

// Alive reports whether the process id names still runs. An ID with a start
// time matches only the process that started then; one without matches any
// process with the pid.
func (id ID) Alive() bool {
	pid := id.Pid()
	if pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return id == self
	}
	if !exists(pid) {
		return false
	}
	if _, start, ok := strings.Cut(string(id), "."); ok {
		return startTime(pid) == start
	}
	return true
}
