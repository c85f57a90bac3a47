// Package authtest is what the auth matrices of both front ends expect:
// their own statement of the levels, written apart from auth.Identity, so
// that a matrix checks the code against it rather than against itself.
package authtest

import "github.com/queen-node/queen-node/auth"

// Allows says whether a token with role may call a route of level; producer
// marks the routes a write-only token may call. Roles nest (admin ⊇
// read-write ⊇ read-only); write-only reaches the producer routes only.
func Allows(role string, level auth.Level, producer bool) bool {
	switch role {
	case "admin":
		return true
	case "read-write":
		return level <= auth.ReadWrite
	case "read-only":
		return level <= auth.ReadOnly
	case "write-only":
		return level == auth.Public || producer
	}
	return false
}

// Unchanged reports whether a refused call changed nothing: the state hash
// is the same after it as before. Every applied entry changes the hash
// (the applied index is part of it), and the node's own entries (a sweep,
// a timer step) may land meanwhile, so a changed hash is looked at again:
// the call is repeated until a window shows no change, up to five times.
// A call that writes changes the hash in every window.
func Unchanged(hash func() string, before string, call func()) bool {
	for range 5 {
		if hash() == before {
			return true
		}
		before = hash()
		call()
	}
	return hash() == before
}
