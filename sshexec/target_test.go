package sshexec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestAuthNeverPrints formats a target every way a caller might log it.
func TestAuthNeverPrints(t *testing.T) {
	secret := "s3cr3t-value"
	tg := &Target{Name: "web", Host: "h", User: "u", Auth: Auth{
		PrivateKey: []byte(secret), Passphrase: []byte(secret), Password: []byte(secret), Agent: true}}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("target", "target", tg, "auth", tg.Auth)
	encoded, err := json.Marshal(tg)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{
		fmt.Sprint(tg), fmt.Sprintf("%+v", *tg), fmt.Sprintf("%#v", *tg), fmt.Sprintf("%v", tg.Auth),
		string(encoded), logged.String(),
	} {
		if strings.Contains(got, secret) || strings.Contains(got, "czNjcjN0") { // base64 of the start
			t.Errorf("credential shown in %s", got)
		}
	}
	if got, want := tg.Auth.String(), "Auth{key,passphrase,password,agent}"; got != want {
		t.Errorf("String: got %q; want %q", got, want)
	}
}

func TestValidate(t *testing.T) {
	ok := func() *Target {
		return &Target{Name: "t", Host: "h", User: "u", Auth: Auth{Password: []byte("x")}, MaxSessions: 10, Keepalive: time.Second}
	}
	loop := ok()
	loop.Jump = loop
	for _, tc := range []struct {
		name   string
		change func(*Target)
		want   string // substring of the error; empty for valid
	}{
		{"valid", func(*Target) {}, ""},
		{"no host", func(t *Target) { t.Host = "" }, "host is empty"},
		{"no user", func(t *Target) { t.User = "" }, "user is empty"},
		{"bad port", func(t *Target) { t.Port = 70000 }, "port 70000"},
		{"bad stop mode", func(t *Target) { t.StopMode = "nice" }, "stop mode"},
		{"bad pin", func(t *Target) { t.HostKey = "MD5:aa" }, "host_key"},
		{"no credential", func(t *Target) { t.Auth = Auth{} }, "no credential"},
		{"no sessions", func(t *Target) { t.MaxSessions = 0 }, "max sessions 0"},
		{"no keepalive", func(t *Target) { t.Keepalive = 0 }, "keepalive"},
		{"jump without credential", func(t *Target) {
			t.Jump = &Target{Name: "j", Host: "j", User: "u", MaxSessions: 1, Keepalive: time.Second}
		}, `"j": no credential`},
		{"jump loop", func(t *Target) { t.Jump = loop }, "jump chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := ok()
			tc.change(tg)
			err := tg.validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v; want %q", err, tc.want)
			}
		})
	}
}
