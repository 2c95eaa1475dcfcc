package matching

import (
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/zxcvbn/match"
)

// removeRepeatBaseData removes extra data not needed for unit tests
func removeRepeatBaseData(matches []*match.Match) []*match.Match {
	for _, m := range matches {
		m.BaseGuesses = 0
		m.BaseMatches = nil
	}
	return matches
}

func TestRepeatMatching(t *testing.T) {
	r := repeatMatch{}

	// doesn't match 0- and 1-character repeat patterns
	equal(t, "len(r.Matches(\"\"))", len(r.Matches("")), 0)
	equal(t, "len(r.Matches(\"#\"))", len(r.Matches("#")), 0)

	// test single-character repeats
	word := "&&&&&"
	for _, pv := range genpws(word, []string{"@", "y4@"}, []string{"u", "u%7"}) {
		matches := removeRepeatBaseData(r.Matches(pv.password))
		equal(t, "repeatMatch{}.Matches("+pv.password+")", matches, []*match.Match{
			{
				Pattern:     "repeat",
				Token:       word,
				I:           pv.i,
				J:           pv.j,
				BaseToken:   "&",
				RepeatCount: 5,
			}})
	}

	// matches repeats with base character
	for length := 3; length <= 12; length++ {
		for _, chr := range []string{"a", "Z", "4", "&"} {
			word := strings.Repeat(chr, length)
			matches := removeRepeatBaseData(r.Matches(word))

			equal(t, "repeatMatch{}.Matches("+word+")", matches, []*match.Match{
				{
					Pattern:     "repeat",
					Token:       word,
					I:           0,
					J:           length - 1,
					BaseToken:   chr,
					RepeatCount: length,
				}})
		}
	}

	// matches multiple adjacent repeats
	matches := removeRepeatBaseData(r.Matches("BBB1111aaaaa@@@@@@"))
	equal(t, `repeatMatch{}.Matches("BBB1111aaaaa@@@@@@")`, matches, []*match.Match{
		{
			Pattern:     "repeat",
			Token:       "BBB",
			I:           0,
			J:           2,
			BaseToken:   "B",
			RepeatCount: 3,
		},
		{
			Pattern:     "repeat",
			Token:       "1111",
			I:           3,
			J:           6,
			BaseToken:   "1",
			RepeatCount: 4,
		},
		{
			Pattern:     "repeat",
			Token:       "aaaaa",
			I:           7,
			J:           11,
			BaseToken:   "a",
			RepeatCount: 5,
		},
		{
			Pattern:     "repeat",
			Token:       "@@@@@@",
			I:           12,
			J:           17,
			BaseToken:   "@",
			RepeatCount: 6,
		},
	})

	// matches multiple repeats with non-repeats in-between
	matches = removeRepeatBaseData(r.Matches("2818BBBbzsdf1111@*&@!aaaaaEUDA@@@@@@1729"))
	equal(t, `repeatMatch{}.Matches("2818BBBbzsdf1111@*&@!aaaaaEUDA@@@@@@1729")`, matches, []*match.Match{
		{
			Pattern:     "repeat",
			Token:       "BBB",
			I:           4,
			J:           6,
			BaseToken:   "B",
			RepeatCount: 3,
		},
		{
			Pattern:     "repeat",
			Token:       "1111",
			I:           12,
			J:           15,
			BaseToken:   "1",
			RepeatCount: 4,
		},
		{
			Pattern:     "repeat",
			Token:       "aaaaa",
			I:           21,
			J:           25,
			BaseToken:   "a",
			RepeatCount: 5,
		},
		{
			Pattern:     "repeat",
			Token:       "@@@@@@",
			I:           30,
			J:           35,
			BaseToken:   "@",
			RepeatCount: 6,
		},
	})

	// test multi-character repeats
	matches = removeRepeatBaseData(r.Matches("abab"))
	equal(t, `repeatMatch{}.Matches("abab")`, matches, []*match.Match{
		{
			Pattern:     "repeat",
			Token:       "abab",
			I:           0,
			J:           3,
			BaseToken:   "ab",
			RepeatCount: 2,
		},
	})

	// matches aabaab as a repeat instead of the aa prefix
	matches = removeRepeatBaseData(r.Matches("aabaab"))
	equal(t, `repeatMatch{}.Matches("aabaab")`, matches, []*match.Match{
		{
			Pattern:     "repeat",
			Token:       "aabaab",
			I:           0,
			J:           5,
			BaseToken:   "aab",
			RepeatCount: 2,
		},
	})

	// identifies ab as repeat string, even though abab is also repeated
	matches = removeRepeatBaseData(r.Matches("abababab"))
	equal(t, `repeatMatch{}.Matches("abababab")`, matches, []*match.Match{
		{
			Pattern:     "repeat",
			Token:       "abababab",
			I:           0,
			J:           7,
			BaseToken:   "ab",
			RepeatCount: 4,
		},
	})
}

func TestCornerCases(t *testing.T) {
	// cases found in fuzzing
	testCases := []string{
		"�\u007f\x00\x00Q",
	}

	r := repeatMatch{}

	for _, password := range testCases {
		_ = r.Matches(password)
	}
}
