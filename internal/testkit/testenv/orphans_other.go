//go:build !linux

package testenv

// adoptOrphans is Linux-only (PR_SET_CHILD_SUBREAPER): elsewhere Main
// does not check for processes left behind.
func adoptOrphans() bool { return false }

func reapOrphans() (stop func()) { return func() {} }

func noneLeft() error { return nil }
