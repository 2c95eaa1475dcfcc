package frequency

import "testing"

// TestLists checks each list's length and ends against v1.0.1's
// FrequencyLists.
func TestLists(t *testing.T) {
	want := map[string]struct {
		n           int
		first, last string
	}{
		"english_wikipedia": {30000, "the", "evaporator"},
		"female_names":      {3712, "mary", "allyn"},
		"male_names":        {983, "james", "alonso"},
		"passwords":         {30000, "123456", "geekboy"},
		"surnames":          {10000, "smith", "bonnette"},
		"us_tv_and_film":    {19160, "you", "a'right"},
	}
	lists := Lists()
	if len(lists) != len(want) {
		t.Errorf("%d lists; want %d", len(lists), len(want))
	}
	for name, w := range want {
		l := lists[name]
		if len(l) != w.n {
			t.Errorf("%s: %d words; want %d", name, len(l), w.n)
			continue
		}
		if l[0] != w.first || l[len(l)-1] != w.last {
			t.Errorf("%s: %q … %q; want %q … %q", name, l[0], l[len(l)-1], w.first, w.last)
		}
	}
}
