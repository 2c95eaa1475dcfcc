package matching

import (
	"testing"

	"github.com/actiongw/actiongw/internal/zxcvbn/match"
)

func Test_sequenceMatch_Matches(t *testing.T) {
	s := sequenceMatch{}

	// doesn't match 1- and 2-character spatial patterns
	equal(t, "len(s.Matches(\"\"))", len(s.Matches("")), 0)
	equal(t, "len(s.Matches(\"a\"))", len(s.Matches("a")), 0)
	equal(t, "len(s.Matches(\"1\"))", len(s.Matches("1")), 0)

	// matches overlapping patterns
	equal(t, "s.Matches(\"abcbabc\")", s.Matches("abcbabc"), []*match.Match{
		{
			Pattern:       "sequence",
			Token:         "abc",
			I:             0,
			J:             2,
			Ascending:     true,
			SequenceName:  "lower",
			SequenceSpace: 26,
		},
		{
			Pattern:       "sequence",
			Token:         "cba",
			I:             2,
			J:             4,
			Ascending:     false,
			SequenceName:  "lower",
			SequenceSpace: 26,
		},
		{
			Pattern:       "sequence",
			Token:         "abc",
			I:             4,
			J:             6,
			Ascending:     true,
			SequenceName:  "lower",
			SequenceSpace: 26,
		},
	})

	// matches embedded sequence patterns
	word := "jihg"
	for _, pv := range genpws(word, []string{"!", "22"}, []string{"!", "22"}) {
		equal(t, "s.Matches("+pv.password+")", s.Matches(pv.password), []*match.Match{
			{
				Pattern:       "sequence",
				Token:         word,
				I:             pv.i,
				J:             pv.j,
				Ascending:     false,
				SequenceName:  "lower",
				SequenceSpace: 26,
			}})

	}

	// matches pattern with the right sequence type
	tests := []struct {
		pattern   string
		name      string
		ascending bool
		space     int
	}{
		{"ABC", "upper", true, 26},
		{"CBA", "upper", false, 26},
		{"PQR", "upper", true, 26},
		{"RQP", "upper", false, 26},
		{"XYZ", "upper", true, 26},
		{"ZYX", "upper", false, 26},
		{"abcd", "lower", true, 26},
		{"dcba", "lower", false, 26},
		{"jihg", "lower", false, 26},
		{"wxyz", "lower", true, 26},
		{"zxvt", "lower", false, 26},
		{"0369", "digits", true, 10},
		{"97531", "digits", false, 10},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			matches := s.Matches(tt.pattern)
			equal(t, "s.Matches("+tt.pattern+")", matches, []*match.Match{{
				Pattern:       "sequence",
				Token:         tt.pattern,
				I:             0,
				J:             len(tt.pattern) - 1,
				Ascending:     tt.ascending,
				SequenceName:  tt.name,
				SequenceSpace: tt.space,
			}})
		})
	}
}
