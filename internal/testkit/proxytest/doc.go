// Package proxytest starts HTTP proxies on loopback for tests: Debian's
// tinyproxy, the real thing (StartTinyproxy), and a small one in Go whose
// name resolution a test decides (StartGo). Each records every byte its
// clients send and the request lines it read, so that a test can prove
// what a proxy could see.
package proxytest
