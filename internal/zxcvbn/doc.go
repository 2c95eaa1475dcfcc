// Package zxcvbn estimates how many guesses finding a password would
// take, trying first what a cracker tries first: common passwords, words
// and names, keyboard walks, repeats, sequences, dates and l33t
// substitutions.
//
// It is a copy of github.com/trustelem/zxcvbn v1.0.1 (MIT, see
// LICENSE.txt), a Go port of Dropbox's zxcvbn 4.4.2; README.md says what
// was changed.
package zxcvbn
