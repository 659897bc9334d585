package dynamotest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"

	"github.com/aws/smithy-go"
)

// ChaosKnobs reads the knobs of the fault-injection harnesses (the tests
// built only with the chaos build tag): IDEMKIT_CHAOS_ROUNDS, the rounds
// to run (default 20), and IDEMKIT_CHAOS_SEED, the seed of their random
// choices (default 1). A seed does not make a run repeatable: the
// goroutines' interleaving is the machine's.
func ChaosKnobs() (rounds int, seed uint64) {
	rounds, _ = strconv.Atoi(os.Getenv("IDEMKIT_CHAOS_ROUNDS"))
	if rounds <= 0 {
		rounds = 20
	}
	seed = 1
	if s, err := strconv.ParseUint(os.Getenv("IDEMKIT_CHAOS_SEED"), 10, 64); err == nil {
		seed = s
	}
	return rounds, seed
}

// LockedRand is a seeded random source safe for concurrent use, shared by
// the goroutines of a harness's round.
type LockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewLockedRand returns a LockedRand seeded with seed and stream (PCG).
func NewLockedRand(seed, stream uint64) *LockedRand {
	return &LockedRand{r: rand.New(rand.NewPCG(seed, stream))}
}

// IntN returns a number in [0, n).
func (l *LockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// Uint64 returns a random uint64.
func (l *LockedRand) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Uint64()
}

// ArmRandomFault arms one fault chosen with r on f, for one to three
// calls of a random operation (or any): throttling (both codes), a 5xx, a
// request timeout before the write applied or after, or an answer lost
// after the write applied. It returns what it armed, for a round's log.
func ArmRandomFault(r *LockedRand, f *Faults) string {
	ops := []string{"PutItem", "UpdateItem", "GetItem", "DeleteItem", AnyOp}
	op := ops[r.IntN(len(ops))]
	n := 1 + r.IntN(3)
	timeout := fmt.Errorf("request timeout (injected): %w", context.DeadlineExceeded)
	switch r.IntN(6) {
	case 0:
		f.FailNext(op, n, Throttle())
		return "throttle " + op
	case 1:
		f.FailNext(op, n, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected", Fault: smithy.FaultServer})
		return "throttling " + op
	case 2:
		f.FailNext(op, n, InternalServerError())
		return "5xx " + op
	case 3:
		f.FailNext(op, 1, timeout)
		return "timeout " + op
	case 4:
		f.FailNextAfterSend(op, 1, timeout)
		return "applied, timed out " + op
	default:
		f.FailNextAfterSend(op, n, ResponseLost())
		return "applied, answer lost " + op
	}
}
