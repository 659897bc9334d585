package boot

import (
	"os"
	"strconv"

	"github.com/idemkit/idemkit/internal/clock"
)

// EnvInitTrace is the variable that, set to 1, makes a function write where
// its start-up time goes: one line per phase on stderr,
//
//	idemkit-init-trace <phase> <Unix time in nanoseconds>
//
// at the end of each phase (main entered, settings read, AWS configuration
// loaded, SDK client built, handler wired, runtime loop started). The
// cold-start benchmark (make bench-cold) reads these lines with the Go
// runtime's GODEBUG=inittrace=1 output. Unset (the default, and in every
// deployment), Trace does nothing.
const EnvInitTrace = "IDEMKIT_INIT_TRACE"

var traceOn = os.Getenv(EnvInitTrace) == "1"

// Trace marks the end of the start-up phase named phase when
// IDEMKIT_INIT_TRACE=1 (see EnvInitTrace); otherwise it does nothing.
func Trace(phase string) {
	if !traceOn {
		return
	}
	b := make([]byte, 0, 64)
	b = append(b, "idemkit-init-trace "...)
	b = append(b, phase...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, clock.Wall().UnixNano(), 10) // a timestamp the trace reader compares across processes
	b = append(b, '\n')
	_, _ = os.Stderr.Write(b)
}
