package payload

import (
	"fmt"
	"testing"
	"unicode/utf8"
)

func TestGenerate(t *testing.T) {
	for _, kind := range Kinds() {
		for _, n := range []int{0, 1, 2, 3, 5, 7, 100, 4097} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				b, err := Generate(kind, n)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) != n {
					t.Errorf("got %d bytes; want %d", len(b), n)
				}
				if !utf8.Valid(b) {
					t.Errorf("got invalid UTF-8 %q", b)
				}
				again, _ := Generate(kind, n)
				if string(again) != string(b) {
					t.Errorf("not deterministic")
				}
			})
		}
	}
	if _, err := Generate("nope", 1); err == nil {
		t.Error("got no error for an unknown kind")
	}
}
