package runs

import (
	"bytes"
	"encoding/json"
	"math/big"
	"time"
)

// Caps are the bounds a run's configurable.run section sets on its
// execution, as the executor enforces them. The host advertises no
// limits.maxRunDurationMs, limits.maxLoopIterations or
// limits.maxNodeExecutions, so each resolves to the value the run was
// created with; zero means the run set none.
type Caps struct {
	// RunTimeout is configurable.run.runTimeoutMs: a run not ended by
	// CreatedAt + RunTimeout is ended failed (run_timeout).
	RunTimeout time.Duration
	// MaxLoopIterations is configurable.run.maxLoopIterations: how many
	// times a run may enter its workflow's loop (loop_limit_exceeded
	// past it).
	MaxLoopIterations int64
	// RecursionLimit is configurable.run.recursionLimit.
	RecursionLimit int64
}

// maxCapMs is the largest runTimeoutMs a time.Duration holds; a larger
// value (the schema sets no maximum) is read as this, a deadline no run
// reaches.
const maxCapMs = int64(1<<63-1) / int64(time.Millisecond)

// Caps reads the run section of the run's configurable (validated at
// create: each key an integer of at least 1, in any JSON spelling of one,
// such as 1e3). A key absent, or a configurable that does not parse,
// reads as zero.
func (o Options) Caps() Caps {
	var c struct {
		Run map[string]json.Number `json:"run"`
	}
	d := json.NewDecoder(bytes.NewReader(o.Configurable))
	d.UseNumber()
	if len(o.Configurable) == 0 || d.Decode(&c) != nil {
		return Caps{}
	}
	whole := func(key string, max int64) int64 {
		n, ok := new(big.Rat).SetString(string(c.Run[key]))
		if !ok || !n.IsInt() || n.Sign() <= 0 {
			return 0
		}
		if !n.Num().IsInt64() || n.Num().Int64() > max {
			return max
		}
		return n.Num().Int64()
	}
	const maxInt = int64(1<<63 - 1)
	return Caps{
		RunTimeout:        time.Duration(whole("runTimeoutMs", maxCapMs)) * time.Millisecond,
		MaxLoopIterations: whole("maxLoopIterations", maxInt),
		RecursionLimit:    whole("recursionLimit", maxInt),
	}
}

// Deadline is when the run's timeout ends it: CreatedAt (to the
// millisecond, as the runs table keeps it) + Caps().RunTimeout; zero when
// the run has no timeout.
func (r Run) Deadline() time.Time { return r.Options.Caps().Deadline(r.CreatedAt) }

// Deadline is when a run created at createdAt with these caps is ended by
// its timeout: createdAt (to the millisecond, as the runs table keeps it)
// + RunTimeout; zero when RunTimeout is zero (Run.Deadline, for a caller
// that has read the caps already).
func (c Caps) Deadline(createdAt time.Time) time.Time {
	if c.RunTimeout <= 0 {
		return time.Time{}
	}
	return createdAt.UTC().Truncate(time.Millisecond).Add(c.RunTimeout)
}
