// Preloaded into dynalite's node process (node --require) by idemkit's
// emulator package.
//
// dynalite's request handler rethrows any error of an incoming request
// (req.on('error', function (err) { throw err })). Node reports a client
// that closes or resets its connection before the request body is whole
// as such an error ("aborted", code ECONNRESET), so one client hanging up
// mid-request would end the engine and every later request would find
// nothing listening. A real DynamoDB endpoint simply drops that request.
//
// This handler ignores exactly that error, with one line on stderr, and
// ends the process on any other uncaught exception as node itself would
// (the stack on stderr, exit status 1).
'use strict'

process.on('uncaughtException', function (err) {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    process.stderr.write('idemkit: a client hung up in the middle of a request; the request is dropped and dynalite goes on\n')
    return
  }
  process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n')
  process.exit(1)
})
