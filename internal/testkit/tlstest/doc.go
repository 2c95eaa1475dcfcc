// Package tlstest makes private certificate authorities for tests: the
// CA's certificate (what a ca_file holds) and key, client certificates it
// signs, and HTTPS servers on loopback whose certificate it signs and
// that may require a client certificate it signed.
package tlstest
