// Package scrub reads every message file of a node in the background, at a
// bounded rate, and checks each index entry and record against its
// checksum (msgstore.ScrubSegment), so that damage on this node's disk is
// found, reported (package damage) and shown on /health before a consumer
// asks for the damaged message, and so that a message nobody reads for
// months is still known to be intact. A pass starts when the node starts
// and then every Interval; its progress and its findings are on /metrics.
package scrub
