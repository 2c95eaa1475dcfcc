package matching

import (
	"github.com/actiongw/actiongw/internal/zxcvbn/match"
	"testing"
)

func TestRegexpMatching(t *testing.T) {
	rm := regexpMatch{regexes: defaultRegexpMatch()}
	equal(t, "rm.Matches(\"1922\")", rm.Matches("1922"), []*match.Match{
		{
			Pattern:   "regex",
			Token:     "1922",
			I:         0,
			J:         3,
			RegexName: "recent_year",
		},
	})

	equal(t, "rm.Matches(\"2017\")", rm.Matches("2017"), []*match.Match{
		{
			Pattern:   "regex",
			Token:     "2017",
			I:         0,
			J:         3,
			RegexName: "recent_year",
		},
	})
}
