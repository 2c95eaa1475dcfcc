package httpact

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestOAuth2RefusedPathFetchesBoundedTokens: an agent calls a path the API
// always answers 401 (a scope the client lacks). Each 401 used to fetch a
// new token, which the gateway's redactor must learn and keep until it
// expires: a loop of such calls grew the redactor by about 10 KiB and its
// rebuild by 50 µs per call, without end, and hammered the token endpoint.
// 401s now fetch at most 4 tokens at once, then one per
// refetchInterval; past that, the 401 is the answer, body and all.
func TestOAuth2RefusedPathFetchesBoundedTokens(t *testing.T) {
	var mu sync.Mutex
	fetches := 0
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"access-%d-%s","token_type":"Bearer","expires_in":3600}`, fetches, testToken)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, "insufficient scope")
	}))
	defer api.Close()

	c, logs := newTestClient(t)
	now := time.Now()
	c.now = func() time.Time { return now }
	learned := 0
	e := testEndpoint(api, Auth{Kind: AuthOAuth2ClientCredentials, OAuth2: &OAuth2{
		TokenURL: tokens.URL, ClientID: "id", ClientSecret: []byte("client-secret"),
		OnToken: func([]byte, time.Time) error { learned++; return nil },
	}})
	call := func() {
		t.Helper()
		var body bytes.Buffer
		res, err := c.Do(context.Background(), e, Request{Method: "GET", Path: "/admin"}, &body)
		if err != nil || res.HTTPStatus != http.StatusUnauthorized || body.String() != "insufficient scope" {
			t.Fatalf("%v %+v body %q; want the 401 and its body", err, res, body.String())
		}
		checkNoSecret(t, logs, res)
	}
	for range 50 {
		call()
	}
	// The first token, then one for each of the first 4 401s.
	if want := 1 + refetchBurst; learned != want || fetches != want {
		t.Errorf("50 calls answered 401: %d tokens fetched, %d learned; want %d", fetches, learned, want)
	}
	now = now.Add(refetchInterval)
	call()
	if want := 2 + refetchBurst; learned != want {
		t.Errorf("after refetchInterval: %d tokens learned; want %d (one more)", learned, want)
	}
}
