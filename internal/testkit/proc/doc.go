// Package proc reads what tests and benchmarks check about a process from
// Linux's /proc: resident memory, CPU time used, state, parent, start time,
// command and descendants. Elsewhere its reads fail (Memory, CPU, StartTime)
// or find nothing (Alive, Parent, Descendants).
package proc
