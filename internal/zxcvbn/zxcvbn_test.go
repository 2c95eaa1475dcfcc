package zxcvbn

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/actiongw/actiongw/internal/zxcvbn/match"
	"github.com/actiongw/actiongw/internal/zxcvbn/scoring"
)

// TestPasswordStrength compares the estimates with those of the original
// zxcvbn (CoffeeScript, release 4.4.2) in testdata/output.json. Its date
// guesses count the years from 2019, when it was made.
func TestPasswordStrength(t *testing.T) {
	defer func(year int) { scoring.ReferenceYear = year }(scoring.ReferenceYear)
	scoring.ReferenceYear = 2019

	var testdata []struct {
		Password string         `json:"password"`
		Guesses  float64        `json:"guesses"`
		Score    int            `json:"score"`
		Sequence []*match.Match `json:"sequence"`
	}

	b, err := os.ReadFile(filepath.Join("testdata", "output.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &testdata); err != nil {
		t.Fatal(err)
	}

	for _, td := range testdata {
		t.Run(td.Password, func(t *testing.T) {
			// map character positions to rune position
			runeMap := make(map[int]int, len(td.Password))
			c := 0
			for i := range td.Password {
				runeMap[i] = c
				c++
			}
			runeMap[len(td.Password)] = c
			s := PasswordStrength(td.Password, nil)
			if len(s.Sequence) != len(td.Sequence) {
				t.Fatalf("sequence %s; want %s", match.ToString(s.Sequence), match.ToString(td.Sequence))
			}
			for j, want := range td.Sequence {
				got := s.Sequence[j]
				for _, f := range []struct {
					name      string
					got, want any
				}{
					{"i", runeMap[got.I], want.I},
					{"j", runeMap[got.J+1] - 1, want.J},
					{"pattern", got.Pattern, want.Pattern},
					{"token", got.Token, want.Token},
					{"guesses", got.Guesses, want.Guesses},
				} {
					if f.got != f.want {
						t.Fatalf("match %d: %s %v; want %v\ngot  %s\nwant %s",
							j, f.name, f.got, f.want, match.ToString([]*match.Match{got}), match.ToString([]*match.Match{want}))
					}
				}
			}
			if s.Guesses != td.Guesses {
				t.Errorf("guesses %v; want %v", s.Guesses, td.Guesses)
			}
			if s.Score != td.Score {
				t.Errorf("score %d; want %d", s.Score, td.Score)
			}
		})
	}
}

func TestCornerCases(t *testing.T) {
	testdata := []string{
		"",
		"wen\x8e\xc6",
	}

	for _, td := range testdata {
		_ = PasswordStrength(td, nil)
	}
}
