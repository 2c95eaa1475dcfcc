// Package proc reads what tests and benchmarks check about a process from
// Linux's /proc: resident memory, CPU time used, state and parent.
package proc
