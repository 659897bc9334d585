package runs

import (
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// forEachWriteMode runs fn on every emulator, in a subtest "conditional"
// (the run written by its own conditional PutItem) and, where the engine
// has transactions, "transactional" (DynamoRuns.Transactional).
func forEachWriteMode(t *testing.T, fn func(t *testing.T, e *dynamotest.Emulator, transactional bool)) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		modes := []bool{false}
		if e.Caps.Transactions {
			modes = append(modes, true)
		}
		for _, transactional := range modes {
			t.Run(map[bool]string{false: "conditional", true: "transactional"}[transactional], func(t *testing.T) {
				fn(t, e, transactional)
			})
		}
	})
}
