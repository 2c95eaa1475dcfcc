package secrets

import (
	"bytes"
	"context"
)

// Memory holds secrets in this process's memory, by name: the demo's
// sandbox credentials, and tests that need no keyring.
type Memory map[string][]byte

// Set stores a copy of value under name.
func (m Memory) Set(_ context.Context, name string, value []byte) error {
	m[name] = bytes.Clone(value)
	return nil
}

// Get returns the secret stored under name, or a *NotFoundError.
func (m Memory) Get(_ context.Context, name string) (Value, error) {
	v, ok := m[name]
	if !ok {
		return Value{}, &NotFoundError{Name: name}
	}
	return NewValue(v), nil
}
