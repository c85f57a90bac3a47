// Package e2e holds end-to-end tests that run the real queen-node binary.
//
// TestMain builds ./cmd/queen-node once per test run into a temporary
// directory. Every test starts its own nodes through nodeproc on free
// 127.0.0.1 ports with temporary data directories, talks to them over HTTP
// exactly as a client would (spec/http-api.md), and kills them with SIGKILL
// or SIGTERM to prove the durability invariants of DESIGN.md (5:
// acknowledged means committed; 7: crash anywhere, recover exactly).
//
// The package has no non-test code; this file only documents it. Run it with
//
//	go test ./e2e/
//
// Each node's output goes to a file whose end is printed when a test fails.
package e2e
