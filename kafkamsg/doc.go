// Package kafkamsg is the stored form of a message a Kafka client
// produced: the frame a Kafka record becomes in a message's payload, so
// that its key, value, headers and timestamp come back byte for byte to a
// Kafka consumer, and the JSON a Queen consumer sees of it.
//
// A frame begins with the byte 0x01: a payload pushed over Queen's APIs is
// JSON text (never beginning with a control byte) and a payload sealed at
// rest begins with 0x00 (package atrest), so the three never mix up. A
// frame is sealed whole when its queue encrypts at rest.
//
// A Queen pop of a framed message sees its value when the value is JSON
// text, null for a null value, and otherwise the wrapper
// {"$base64":"<the value in standard base64>"}.
package kafkamsg
