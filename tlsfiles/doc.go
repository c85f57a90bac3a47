// Package tlsfiles serves TLS from certificate and key files that an
// operator may replace at any time (a renewed certificate, a rotated key):
// the pair is reread when either file changes or on Reload (SIGHUP), and a
// pair that does not load keeps the one loaded before, so a bad renewal
// never drops the node. crypto/tls does the rest.
package tlsfiles
