package output

import (
	"time"

	"github.com/actiongw/actiongw/internal/redact"
)

// testSpoolOptions and previews are the sizes a configured server uses.
var (
	testSpoolOptions = SpoolOptions{TTL: 24 * time.Hour, MaxBytes: 1 << 30, RetainHeadBytes: 1 << 20, RetainTailBytes: 8 << 20}
	previews         = Limits{HeadBytes: 4096, TailBytes: 4096}
)

// newRedactor builds a Redactor from secrets keyed by name.
func newRedactor(m map[string][]byte) (*redact.Redactor, error) {
	list := make([]redact.Secret, 0, len(m))
	for name, v := range m {
		list = append(list, redact.Secret{Name: name, Value: v})
	}
	return redact.New(list)
}

// settle waits until sp has moved in every action it took over.
func (sp *Spool) settle() {
	sp.mu.Lock()
	ch := sp.settled
	sp.mu.Unlock()
	<-ch
}
