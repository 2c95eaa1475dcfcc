//go:build unix

package sshtest

import "syscall"

const unix = true

func kill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

func freeze(pid int) { syscall.Kill(pid, syscall.SIGSTOP) }
