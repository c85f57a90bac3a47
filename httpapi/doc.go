// Package httpapi serves Queen MQ's HTTP API (../shared/spec/http-api.md)
// over a Backend. It keeps the wire only: it decodes JSON bodies and query
// strings into package request's input types (member names match exactly;
// every member's JSON type is checked with the spec's texts), lets the rules
// there turn them into commands or refusals, proposes each write as one
// command through propose (Idempotency-Key included, package idempotency),
// and shapes the results into the JSON Queen's clients expect. Every failure
// is answered by writeError with the status request gives it.
package httpapi
