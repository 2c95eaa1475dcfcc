package payload

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// units are repeated to build each kind of payload.
var units = map[string]string{
	"ascii":     "The quick brown fox jumps over the lazy dog 0123456789. ",
	"quotes":    `say "hi" \ 'yo' \"x\" {"k":"v"} `,
	"multibyte": "é漢字🙂ü∑ßЖ",
	"unbroken":  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
	"control":   "a\tb\nc\r\x00\x1f\x7f\u2028\u2029</script>",
}

// Kinds lists the payload kinds.
func Kinds() []string {
	return []string{"ascii", "quotes", "multibyte", "unbroken", "control"}
}

// Generate returns exactly n bytes of valid UTF-8 of the given kind. A
// multibyte character that would not fit whole at the end is replaced by
// ASCII padding.
func Generate(kind string, n int) ([]byte, error) {
	unit, ok := units[kind]
	if !ok {
		return nil, fmt.Errorf("unknown payload kind %q (want one of %s)", kind, strings.Join(Kinds(), ", "))
	}
	if n < 0 {
		return nil, fmt.Errorf("negative payload size %d", n)
	}
	b := make([]byte, 0, n)
	for len(b) < n {
		for _, r := range unit {
			if len(b)+utf8.RuneLen(r) > n {
				for len(b) < n {
					b = append(b, '.')
				}
				break
			}
			b = utf8.AppendRune(b, r)
		}
	}
	return b, nil
}
