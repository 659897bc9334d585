package conform

import (
	"os"
	"testing"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMain lets more of the parallel scenario runs wait at once: each one
// spends seconds in the scenarios' deliberate delays (a slow first
// request, staggered duplicates) and little on the CPU.
func TestMain(m *testing.M) {
	testutil.WaitingParallel(conformParallel)
	os.Exit(m.Run())
}

// conformParallel is how many parallel tests run at once.
const conformParallel = 8
