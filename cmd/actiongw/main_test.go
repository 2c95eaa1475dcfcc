package main

import (
	"testing"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// actiongwBinary is the command, built once per test process, for a test
// that runs it as a person would.
func actiongwBinary(t testing.TB) string { return testenv.Actiongw(t) }

// TestMain stops the tests' Secret Service and removes the binaries after
// the tests, and fails the run if a process they started still runs.
func TestMain(m *testing.M) { testenv.Main(m) }
