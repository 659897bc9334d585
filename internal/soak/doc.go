// Package soak checks the history of a soak run against Layer 1's contract.
//
// A soak drives mixed load at `idemkit dev` while faults are injected (the
// process killed, the engine paused or killed, responses dropped after the
// write applied, throttling) and records every attempt a client made: its
// key, a digest of its body, when it started and ended, and what came back.
// Check then decides, per key, whether the history is linearizable against
// the model of one idempotency record (Model), using the porcupine checker:
//
//   - the first final answer under a key is what every later request with
//     the same key and body receives, byte for byte, marked as a replay;
//     never a second unmarked (executed) answer, never another run id;
//   - a request with another body gets the mismatch, never a replay;
//   - idempotency_in_flight only while another request under the key is
//     open, or an abandoned one (no answer, or a 5xx) may still hold the
//     lease;
//   - a 5xx is never a replay: server errors are not recorded.
//
// An attempt that got no answer (the connection broke, the client gave up)
// may or may not have taken effect: the model lets it finalise the record
// with an answer nobody saw, which a later replay then fixes. A request
// refused before it was sent (dev was down) is not in the history.
//
// The package also holds the fault proxy a soak puts between dev and its
// engine (Proxy), so the faults are injected on the wire, below every
// retry of the AWS SDK.
package soak
