package dynamostore

import (
	"testing"
	"time"
)

// ShortenChunkReadPauses makes the pauses between the rounds of a chunk
// read a microsecond until t ends: the rounds and their verdict stay the
// same, without waiting out about 15 s of backoff. Not for parallel tests.
func ShortenChunkReadPauses(t testing.TB) {
	pause, max := chunkReadPause, chunkReadPauseMax
	chunkReadPause, chunkReadPauseMax = time.Microsecond, time.Microsecond
	t.Cleanup(func() { chunkReadPause, chunkReadPauseMax = pause, max })
}
