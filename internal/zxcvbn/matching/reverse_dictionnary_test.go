package matching

import (
	"testing"

	"github.com/actiongw/actiongw/internal/zxcvbn/match"
)

func Test_reverseDictionnaryMatch(t *testing.T) {
	rdm := reverseDictionnaryMatch{
		dm: dictionaryMatch{
			rankedDictionaries: map[string]rankedDictionnary{
				"d1": rankedDictionnary{
					"123": 1,
					"321": 2,
					"456": 3,
					"654": 4,
				},
			},
		},
	}

	password := "0123456789"
	equal(t, "rdm.Matches("+password+")", rdm.Matches(password), []*match.Match{
		{
			Pattern:        "dictionary",
			Token:          "123",
			MatchedWord:    "321",
			Rank:           2,
			DictionaryName: "d1",
			I:              1,
			J:              3,
			Reversed:       true,
		},
		{
			Pattern:        "dictionary",
			Token:          "456",
			MatchedWord:    "654",
			Rank:           4,
			DictionaryName: "d1",
			I:              4,
			J:              6,
			Reversed:       true,
		},
	})
}
