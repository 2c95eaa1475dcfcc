package policy

import "testing"

func TestRelativeProgram(t *testing.T) {
	tests := []struct {
		pattern string
		want    string // the program; "" for none
	}{
		{`^\./run\.sh$`, "./run.sh"},
		{`\./run\.sh`, "./run.sh"},
		{`^bin/deploy( .*)?$`, "bin/deploy"},
		{`^\.\./tools/x [a-z]+$`, "../tools/x"},
		{`^(?:uptime|\./run\.sh)$`, "./run.sh"},
		{`^(\./start|\./stop)\.sh$`, "./start.sh"}, // the first alternative
		{`^(\./)?run\.sh$`, "./run.sh"},
		{`^[.]/run\.sh$`, "./run.sh"}, // a one-character class is a literal
		{`(?i)^\./RUN\.SH$`, "./RUN.SH"},
		{`^LANG=C \./run\.sh$`, "./run.sh"},
		{`^(\./x)+$`, "./x"},
		{`^/usr/bin/run\.sh$`, ""},     // absolute
		{`^~/bin/run\.sh$`, ""},        // the home directory's
		{`^run\.sh$`, ""},              // found on $PATH
		{`^journalctl -u [a-z]+$`, ""}, // no slash
		{`^cat logs/app\.log$`, ""},    // the program is cat
		{`^[a.]/run\.sh$`, ""},         // not literal
		{`^.*$`, ""},
		{`^\s*\./run\.sh$`, ""}, // left to a class: not judged
		{`(`, ""},               // not a pattern
	}
	for _, tt := range tests {
		got, ok := RelativeProgram(tt.pattern)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("RelativeProgram(%q): got %q, %v; want %q", tt.pattern, got, ok, tt.want)
		}
	}
}
