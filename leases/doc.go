// Package leases holds the rules of a consumer group's hold on a partition:
// when a lease is live, how it is granted, extended and released, and how
// the acks of its delivered run move the group's cursor. Everything is a
// pure function of the stored records and the entry's time, so every
// replica reaches the same verdict; see DESIGN.md.
package leases
