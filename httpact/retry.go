package httpact

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

const (
	defaultWaitMin       = 200 * time.Millisecond
	defaultWaitMax       = 5 * time.Second
	defaultRetryAfterMax = 30 * time.Second
)

// retrier is the per-request retry state behind retryablehttp's CheckRetry
// and Backoff hooks, which it calls one after the other on the request's
// goroutine.
type retrier struct {
	policy     RetryPolicy // defaults applied
	idempotent bool
	attempts   int           // attempts made so far
	wait       time.Duration // decided by check, returned by backoff
}

func newRetrier(p RetryPolicy, method string, h http.Header) *retrier {
	p.MaxAttempts = max(p.MaxAttempts, 1)
	p.WaitMin = orDefault(p.WaitMin, defaultWaitMin)
	p.WaitMax = max(orDefault(p.WaitMax, defaultWaitMax), p.WaitMin)
	p.RetryAfterMax = orDefault(p.RetryAfterMax, defaultRetryAfterMax)
	var idempotent bool
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		idempotent = true
	default:
		idempotent = h.Get("Idempotency-Key") != ""
	}
	return &retrier{policy: p, idempotent: idempotent}
}

// client returns the retrying client that sends one request with rt's
// policy through tr.
func (rt *retrier) client(tr http.RoundTripper, redirects func(*http.Request, []*http.Request) error) *retryablehttp.Client {
	return &retryablehttp.Client{
		HTTPClient:     &http.Client{Transport: tr, CheckRedirect: redirects},
		Logger:         nil, // its lines carry URLs with query strings
		RetryMax:       rt.policy.MaxAttempts - 1,
		CheckRetry:     rt.check,
		Backoff:        rt.backoff,
		ErrorHandler:   retryablehttp.PassthroughErrorHandler,
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, i int) { rt.attempts = i + 1 },
	}
}

// check is retryablehttp.CheckRetry. It never returns an error of its own,
// so the last response is what the caller gets once retries stop.
func (r *retrier) check(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if !r.idempotent || r.attempts >= r.policy.MaxAttempts {
		return false, nil
	}
	if err != nil {
		if !retryableError(err) {
			return false, nil
		}
	} else if resp.StatusCode != http.StatusTooManyRequests &&
		(resp.StatusCode < 500 || resp.StatusCode == http.StatusNotImplemented) {
		return false, nil
	}
	r.wait = r.backoffFor(resp)
	// A wait that outlasts the deadline would turn a real answer into a
	// timeout: return the answer instead.
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= r.wait {
		return false, nil
	}
	return true, nil
}

// backoff is retryablehttp.Backoff.
func (r *retrier) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
	return r.wait
}

// backoffFor honours Retry-After (capped) on a 429 or 5xx, and otherwise
// waits an exponential, jittered, bounded time.
func (r *retrier) backoffFor(resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return min(d, r.policy.RetryAfterMax)
		}
	}
	d := r.policy.WaitMax
	if shift := r.attempts - 1; shift < 30 {
		d = min(r.policy.WaitMin<<shift, r.policy.WaitMax)
	}
	// Equal jitter: between half and all of d.
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads delay-seconds or an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// retryableError reports whether a transport error may go away on retry.
func retryableError(err error) bool {
	var (
		blocked   *BlockedAddressError
		proxy     *ProxyError
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &blocked), errors.As(err, &proxy), errors.As(err, &verify), errors.As(err, &unknownCA),
		errors.As(err, &hostname), errors.As(err, &invalid):
		return false
	}
	return true
}
