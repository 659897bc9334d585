// Package proc runs helper processes (DynamoDB emulators, the built
// idemkit binary, the Lambda RIE) so that they never outlive their parent,
// and offers the small pieces that starting a local server needs: a free
// loopback port, a readiness poll and a goroutine-safe output buffer.
//
// Guarantees of Start:
//   - the process leads its own process group, so Stop also stops anything
//     it spawned (SIGTERM to the group, SIGKILL after the grace period, and
//     SIGKILL to any straggler of the group once the leader is gone);
//   - on Linux it is started with Pdeathsig=SIGKILL from a goroutine that
//     keeps its OS thread locked and stays blocked in Wait for the life of
//     the process, so a crashed or SIGKILLed parent takes the child down
//     with it (Pdeathsig fires when the forking thread dies, and that thread
//     dies exactly when the parent does). Elsewhere a crashed parent may
//     leave the child running; Stop still works on a normal exit.
//
// The package depends on the standard library only, so test helpers can
// import it without pulling in the AWS SDK.
package proc
