package zxcvbn

import (
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/zxcvbn/scoring"
)

// TestSameAsTrustelem compares the estimates with those of
// github.com/trustelem/zxcvbn v1.0.1, the code this package copies,
// computed once with it (and ReferenceYear 2026): the changes made to the
// copy (see README.md) must not change a guess.
func TestSameAsTrustelem(t *testing.T) {
	defer func(year int) { scoring.ReferenceYear = year }(scoring.ReferenceYear)
	scoring.ReferenceYear = 2026

	tests := []struct {
		name     string
		password string
		guesses  float64
		score    int
		patterns string // of the sequence, space-separated
	}{
		{"empty", "", 1, 0, ""},
		{"invalid utf-8", "wen\x8e\xc6", 0, 0, ""},
		{"common password", "password", 3, 0, "dictionary"},
		{"common password capitalised", "Password1", 379, 0, "dictionary"},
		{"digits", "123456", 2, 0, "dictionary"},
		{"top password with year", "Dragon1987", 15000, 1, "dictionary regex"},
		{"name with year", "Princess2020", 57672, 1, "dictionary repeat"},
		{"word and digits", "baseball1234", 15000, 1, "dictionary dictionary"},
		{"passphrase", "correcthorsebatterystaple", 2.7350032770064e+14, 4, "dictionary dictionary dictionary dictionary"},
		{"passphrase with spaces", "correct horse battery staple", 2.13811968952e+20, 4, "dictionary bruteforce dictionary bruteforce dictionary"},
		{"passphrase with dashes", "Correct-Horse-Battery-Staple", 1.7104257516159998e+21, 4, "dictionary bruteforce dictionary bruteforce dictionary"},
		{"sentence", "Athena lavished a marvelous splendor", 1.529741031089717e+24, 4, "dictionary bruteforce dictionary bruteforce dictionary bruteforce dictionary"},
		{"l33t", "p@ssw0rd", 9, 0, "dictionary"},
		{"l33t dollar", "p@$$w0rd!", 11100, 1, "dictionary bruteforce"},
		{"l33t phrase", "Tr0ub4dour&3", 1.9058e+07, 2, "dictionary bruteforce"},
		{"l33t mixed", "coRrecth0rseba++ery9.23.2007staple$", 5.150562665106304e+20, 4, "dictionary dictionary dictionary date dictionary"},
		{"reversed word", "drowssap", 5, 0, "dictionary"},
		{"keyboard walk", "qwertyuiop", 23, 0, "dictionary"},
		{"keyboard walk shifted", "QWERasdf!@#$", 1.2714793120000002e+09, 3, "dictionary spatial"},
		{"keyboard columns", "1qaz2wsx3edc", 1001, 0, "dictionary"},
		{"keypad", "789456123", 383, 0, "dictionary"},
		{"keyboard walk off the dictionaries", "zxcvbnm,./", 3889.0000000000005, 1, "spatial"},
		{"keyboard walk with turns", "mnbvcxzlkjhgf", 346960.00000000006, 1, "dictionary spatial"},
		{"keyboard walk and word", "monkey!qazxsw", 1.007425e+08, 3, "dictionary bruteforce dictionary"},
		{"dvorak walk", "aoeuidhtns", 3889.0000000000005, 1, "spatial"},
		{"date with slashes", "13/3/1997", 42341, 1, "date"},
		{"date in word", "neverforget13/3/1997", 4.920409e+09, 3, "dictionary dictionary date"},
		{"date no separator", "19880214", 13871, 1, "date"},
		{"date short", "1191", 9126, 1, "date"},
		{"date dots", "2.14.2026", 29201, 1, "date"},
		{"recent year", "summer2025", 307159.99999999994, 1, "dictionary spatial"},
		{"far year", "1066hastings", 4.069264e+06, 2, "dictionary dictionary"},
		{"repeat", "aaaaaaaaaaaa", 145, 0, "repeat"},
		{"repeat of words", "abcabcabcabc", 53, 0, "repeat"},
		{"repeat long", strings.Repeat("ab", 50), 451, 0, "repeat"},
		{"sequence", "abcdefghijklmnop", 65, 0, "sequence"},
		{"sequence descending", "987654321", 11, 0, "dictionary"},
		{"name and surname", "briansmith", 15000, 1, "dictionary dictionary"},
		{"tv and film", "starwars1977", 15200, 1, "dictionary regex"},
		{"wikipedia words", "thegreatestshowman", 1.0241283328e+12, 4, "dictionary dictionary dictionary dictionary"},
		{"unicode", "pässwörd", 1.00000001e+08, 2, "bruteforce"},
		{"unicode phrase", "Eupithes’sonAntinousbroketheirsilence", 1.116864e+29, 4, "bruteforce dictionary dictionary dictionary"},
		{"latin-1 bytes", "éÿ\x01\u0080ZqÃ", 1.0000001e+07, 2, "bruteforce"},
		{"hex token", "0cdd1036ea8752bab7298fa46de18fd4", 3e+31, 4, "bruteforce sequence bruteforce"},
		{"base64 token", "C+udDkBVac+MeF4rqdEXq7lcdTvUH6NR/SArmZTSO7s=", 1e+44, 4, "bruteforce"},
		{"base64 short", "KUNcRxX1OeN+YvBS", 1e+16, 4, "bruteforce"},
		{"alphanumeric 20", "RtUrMiWHZfNsBdVXCAjO", 1e+20, 4, "bruteforce"},
		{"prefixed token", "ghp_RtUrMiWHZfNsBdVXCAjO", 1e+24, 4, "bruteforce"},
		{"random 100", "O1vdcQn67R9mF2nezmk/QwFldBew0aYjYxM+TRd9mFJicT2DO2kwNR4lNPt8dBJXXJDwUTbovUtqpajh+F0+WhMTiHw73GMEGyZ/", 1.0000000000000002e+100, 4, "bruteforce"},
		{"random lowercase", "eheuczkqyq", 1.0000000001e+10, 3, "bruteforce"},
		{"punctuation", "!\"£$%^&*()", 1.0378000000000002e+07, 2, "bruteforce spatial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := PasswordStrength(tt.password, nil)
			if r.Guesses != tt.guesses {
				t.Errorf("PasswordStrength(%q).Guesses = %v; want %v", tt.password, r.Guesses, tt.guesses)
			}
			if r.Score != tt.score {
				t.Errorf("PasswordStrength(%q).Score = %d; want %d", tt.password, r.Score, tt.score)
			}
			var patterns []string
			for _, m := range r.Sequence {
				patterns = append(patterns, m.Pattern)
			}
			if got := strings.Join(patterns, " "); got != tt.patterns {
				t.Errorf("PasswordStrength(%q) patterns %q; want %q", tt.password, got, tt.patterns)
			}
		})
	}
}
