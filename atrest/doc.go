// Package atrest is encryption at rest (spec §5.12): the key file, and
// sealing a message payload with AES-256-GCM before it enters the Raft log,
// so the log, the message files, the state file (timers, dead letters) and
// every snapshot hold ciphertext; and opening it again where a payload
// leaves the broker.
//
// A sealed payload is self-describing (see Seal): it names the key that
// sealed it, so a key file may gain newer keys (rotation: the newest
// seals) while older ones still open what they sealed. Payloads are JSON
// text, which never begins with the envelope's NUL byte, so a stored
// payload is either plaintext or an envelope, never ambiguous.
//
// Sealing is the proposer's job (the leader, before it encodes the entry):
// a random nonce must not be drawn by apply, which is deterministic.
package atrest
