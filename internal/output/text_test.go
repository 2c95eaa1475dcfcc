package output

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 1024) // two bytes each, cut in the middle of one
	got := Clip(long[:1023]+"x", 1023)
	if !utf8.ValidString(got) || len(got) > 1023+len("...") || !strings.HasSuffix(got, "...") {
		t.Errorf("Clip of %d bytes at 1023: %d bytes, valid %v", len(long), len(got), utf8.ValidString(got))
	}
	if Clip("short", 10) != "short" {
		t.Error("a short text was changed")
	}
}
