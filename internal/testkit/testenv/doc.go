// Package testenv is what the project's tests share about the machine they
// run on: whether a part they need is here (and what to do when it is not),
// a private Secret Service of their own, the actiongw binary, waiting on a
// condition, and the end-of-suite checks of TestMain.
//
// A test that needs a part the machine lacks ends with Missing: on a
// newcomer's machine it is skipped, and the person at the terminal is told
// once per `go test` run which tests were skipped and how to run them; under
// CI (the CI variable set, as .ci/run sets it) it fails, since CI must run
// every test. Tests find out what is here by probing for it, never from a
// variable a newcomer would have to know.
//
// Every package whose tests use SecretService or Actiongw, or start
// processes, calls Main from its TestMain.
package testenv
