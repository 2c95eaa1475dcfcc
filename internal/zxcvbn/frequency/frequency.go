// Package frequency holds zxcvbn's ranked word lists: common passwords,
// English words by frequency in Wikipedia and in US television and film,
// and US surnames and first names from the census.
package frequency

import (
	_ "embed"
	"strings"
)

// The lists are v1.0.1's frequency/lists.go (which its
// data-scripts/build_frequency_lists.py made), written out one word a
// line in rank order. No word holds white space.
var (
	//go:embed english_wikipedia.txt
	englishWikipedia string
	//go:embed female_names.txt
	femaleNames string
	//go:embed male_names.txt
	maleNames string
	//go:embed passwords.txt
	passwords string
	//go:embed surnames.txt
	surnames string
	//go:embed us_tv_and_film.txt
	usTVAndFilm string
)

// Lists returns the word lists by name, each most common first. The words
// are slices of the binary's read-only data, not copies; each call splits
// the lists anew.
func Lists() map[string][]string {
	return map[string][]string{
		"english_wikipedia": strings.Fields(englishWikipedia),
		"female_names":      strings.Fields(femaleNames),
		"male_names":        strings.Fields(maleNames),
		"passwords":         strings.Fields(passwords),
		"surnames":          strings.Fields(surnames),
		"us_tv_and_film":    strings.Fields(usTVAndFilm),
	}
}
