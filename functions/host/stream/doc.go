// Package stream owns the reference host's view of a DynamoDB stream record
// (StreamRecord), the same whether it came from a Lambda event source
// mapping (FromLambda) or from polling the stream (FromStreams, `idemkit
// dev`), and the TTL-deletion test.
package stream
