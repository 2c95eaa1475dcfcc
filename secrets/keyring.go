package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zalando/go-keyring"
)

// DefaultService is the service name under which actiongw keeps its items.
const DefaultService = "actiongw"

// MaxValueBytes is the largest value Set stores: the Secret Service slows
// down with big items, and 1 MiB holds any key or token.
const MaxValueBytes = 1 << 20

// Keyring reads and writes named secrets in the OS keyring. The zero value
// is ready to use. Every method takes a context that can end a call that
// waits on the keyring (a daemon that hangs, an unlock prompt nobody
// answers).
type Keyring struct {
	// Service is the service name of every item; empty means DefaultService.
	// Tests set their own so they cannot touch a person's items.
	Service string
}

func (k *Keyring) service() string {
	if k.Service == "" {
		return DefaultService
	}
	return k.Service
}

// Get returns the secret stored under name. It returns a *NotFoundError when
// there is none, a *NoServiceError (errors.Is ErrNoService) when no Secret
// Service answers, ErrLocked when the keyring cannot be unlocked, and a
// *NameError for a bad name.
func (k *Keyring) Get(ctx context.Context, name string) (Value, error) {
	var s string
	err := k.do(ctx, name, func() (err error) {
		s, err = keyring.Get(k.service(), name)
		return err
	})
	if err != nil {
		return Value{}, err
	}
	return NewValue([]byte(s)), nil
}

// Present reports whether the keyring holds a secret under name. Its errors
// are Get's, less *NotFoundError.
func (k *Keyring) Present(ctx context.Context, name string) (bool, error) {
	_, err := k.Get(ctx, name)
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// Set stores value under name, replacing what was there. The value is kept
// byte for byte; it must be 1 to MaxValueBytes long. Its errors are Get's,
// less *NotFoundError.
func (k *Keyring) Set(ctx context.Context, name string, value []byte) error {
	switch {
	case len(value) == 0:
		return fmt.Errorf("secret %q: the value is empty", name)
	case len(value) > MaxValueBytes:
		return fmt.Errorf("secret %q: the value is %d bytes, more than the limit of %d", name, len(value), MaxValueBytes)
	}
	return k.do(ctx, name, func() error {
		return keyring.Set(k.service(), name, string(value))
	})
}

// Delete removes the secret stored under name. Its errors are Get's.
func (k *Keyring) Delete(ctx context.Context, name string) error {
	return k.do(ctx, name, func() error {
		return keyring.Delete(k.service(), name)
	})
}

// Ping reports, as a *NoServiceError, that no Secret Service answers, so a
// caller can find out before it asks a person to type a secret. Where
// go-keyring needs no Secret Service (macOS, Windows) it returns nil.
func (k *Keyring) Ping(ctx context.Context) error { return probe(ctx) }

// Load gets every named secret, as a server does at start. The secrets that
// are missing are reported together, as *NotFoundError values joined with
// errors.Join; any other error (no Secret Service, a locked keyring, a bad
// name) ends the walk and is returned alone. On error the map is nil.
func (k *Keyring) Load(ctx context.Context, names []string) (map[string]Value, error) {
	values := make(map[string]Value, len(names))
	var missing []error
	for _, name := range names {
		v, err := k.Get(ctx, name)
		var nf *NotFoundError
		switch {
		case errors.As(err, &nf):
			missing = append(missing, err)
		case err != nil:
			return nil, err
		default:
			values[name] = v
		}
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	return values, nil
}

// calls lets one keyring call run at a time in this process: go-keyring
// shares one session-bus connection, which do closes when a call ends.
var calls = make(chan struct{}, 1)

// do runs op, a go-keyring call, which takes no context. It first checks on
// a connection of its own, which ctx can end, that a Secret Service answers,
// so a missing bus or service fails fast. Then it runs op in a goroutine and,
// whether op returns or ctx ends first, closes go-keyring's shared
// connection, which ends a call still pending on it, and waits for op: no
// goroutine of a call outlives it.
func (k *Keyring) do(ctx context.Context, name string, op func() error) error {
	if err := CheckName(name); err != nil {
		return err
	}
	select {
	case calls <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("keyring: %w", context.Cause(ctx))
	}
	defer func() { <-calls }()

	if err := probe(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			// Closing the connection under a pending unlock prompt makes
			// go-keyring read a nil signal from the closed channel and
			// dereference it; that is our cancellation, not a crash.
			if r := recover(); r != nil {
				if ctx.Err() == nil {
					panic(r)
				}
				done <- errors.New("connection closed")
			}
		}()
		done <- op()
	}()
	select {
	case err := <-done:
		closeShared()
		return classify(name, err)
	case <-ctx.Done():
		closeShared()
		<-done
		return fmt.Errorf("keyring: %w", context.Cause(ctx))
	}
}

// classify turns go-keyring's errors into this package's.
func classify(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, keyring.ErrNotFound):
		return &NotFoundError{name}
	case isNoService(err):
		return &NoServiceError{err}
	// go-keyring's Secret Service backend returns this text, untyped, when
	// Unlock of the default collection fails (locked and no prompt could be
	// shown, or the collection does not exist).
	case strings.HasPrefix(err.Error(), "failed to unlock correct collection"):
		return fmt.Errorf("keyring: %w", ErrLocked)
	}
	return fmt.Errorf("keyring: secret %q: %w", name, err)
}
