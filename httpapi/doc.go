// Package httpapi serves Queen MQ's HTTP API (../shared/spec/http-api.md)
// over a Backend: it decodes and validates requests (every malformed input is
// a 4xx that changes nothing), turns them into fsm commands, and shapes the
// results into the JSON Queen's clients expect.
package httpapi
