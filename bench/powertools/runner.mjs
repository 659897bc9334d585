// Peer side of the side-by-side benchmark (bench/compare drives it).
//
// Powertools for AWS Lambda (TypeScript) makeIdempotent around an HTTP API
// (payload 2.0) handler, and a plain PutItem floor from the same SDK. The
// driver writes one JSON command per line on stdin; each answer is one JSON
// line on stdout. Latencies are measured here, in this process, around the
// awaited call only.
//
// Commands:
//   {"op":"init","endpoint":URL,"table":T,"floorTable":F,"body":B}
//   {"op":"run","case":"floor"|"first"|"replay","n":N,"prefix":P}
//       -> {"us":[...]}  one latency (µs) per request; "first" remembers
//          its keys, "replay" re-sends them (same key, same body)
//   {"op":"one","key":K,"body":B}
//       -> {"outcome":"ok"|<error name>}  one request with key K and body B
//          (the cost pass: a replay, a mismatch, an in-flight answer)
//   {"op":"hold","key":K} -> {"ok":true} once a request with key K is
//          inside the handler, which then waits for "release"
//   {"op":"release"} -> {"outcome":...} of the held request
//   {"op":"quit"}
// init takes an optional "respBody": the body the handler answers (the
// cost pass's response sizes); without it a small JSON run answer.
import { createInterface } from 'node:readline';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { makeIdempotent, IdempotencyConfig } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

let client, handler, floorTable, body, respBody;
let held = null; // {release, done}: the request "hold" started
let keys = [];

const lambdaContext = () => ({
  functionName: 'bench',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:bench',
  memoryLimitInMB: '1024',
  awsRequestId: 'req-' + Math.random().toString(36).slice(2),
  logGroupName: '/aws/lambda/bench',
  logStreamName: 'bench',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 30000,
  done() {}, fail() {}, succeed() {},
});

const event = (key, reqBody = body) => ({
  version: '2.0',
  routeKey: 'POST /runs',
  rawPath: '/runs',
  rawQueryString: '',
  headers: { 'content-type': 'application/json', 'idempotency-key': key },
  requestContext: {
    requestId: 'req-' + key,
    routeKey: 'POST /runs',
    http: { method: 'POST', path: '/runs' },
    authorizer: { lambda: { tenantId: 'tenant-a' } },
  },
  body: reqBody,
  isBase64Encoded: false,
});

function init(cmd) {
  client = new DynamoDBClient({
    endpoint: cmd.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'idemkit', secretAccessKey: 'idemkit' },
  });
  floorTable = cmd.floorTable;
  body = cmd.body;
  respBody = cmd.respBody;
  const persistenceStore = new DynamoDBPersistenceLayer({ tableName: cmd.table, awsSdkV3Client: client });
  // The key is the Idempotency-Key header; the body is validated on replay
  // (a different body under the same key is rejected), as idemkit does.
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'headers."idempotency-key"',
    payloadValidationJmesPath: 'body',
    throwOnNoIdempotencyKey: true,
  });
  handler = makeIdempotent(async (ev) => {
    if (held && held.key === ev.headers['idempotency-key'] && !held.entered) {
      held.entered = true;
      held.inside();
      await held.wait;
    }
    return {
      statusCode: 201,
      headers: { 'content-type': 'application/json' },
      body: respBody ?? JSON.stringify({ runId: 'run_' + ev.requestContext.requestId, status: 'accepted' }),
    };
  }, { persistenceStore, config });
}

async function run(cmd) {
  const us = new Array(cmd.n);
  if (cmd.case === 'first') keys = [];
  for (let i = 0; i < cmd.n; i++) {
    let t0;
    if (cmd.case === 'floor') {
      const put = new PutItemCommand({
        TableName: floorTable,
        Item: { pk: { S: cmd.prefix + i }, v: { S: 'x' } },
      });
      t0 = process.hrtime.bigint();
      await client.send(put);
    } else {
      const key = cmd.case === 'first' ? cmd.prefix + i : keys[i % keys.length];
      if (cmd.case === 'first') keys.push(key);
      const ev = event(key);
      const ctx = lambdaContext();
      t0 = process.hrtime.bigint();
      const out = await handler(ev, ctx);
      if (out.statusCode !== 201) throw new Error('status ' + out.statusCode);
    }
    us[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  return us;
}

// one sends one request; its outcome is "ok" for a 201, else the error's
// name (IdempotencyValidationError for a mismatch,
// IdempotencyAlreadyInProgressError in flight, a persistence error when the
// record cannot be stored).
async function one(key, reqBody) {
  try {
    const out = await handler(event(key, reqBody ?? body), lambdaContext());
    return out.statusCode === 201 ? 'ok' : 'status ' + out.statusCode;
  } catch (err) {
    return (err && err.name) || String(err);
  }
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  try {
    if (cmd.op === 'init') {
      init(cmd);
      process.stdout.write(JSON.stringify({ ok: true }) + '\n');
    } else if (cmd.op === 'run') {
      const c0 = process.cpuUsage();
      const us = await run(cmd);
      const c = process.cpuUsage(c0);
      process.stdout.write(JSON.stringify({ us, cpuUs: c.user + c.system }) + '\n');
    } else if (cmd.op === 'one') {
      process.stdout.write(JSON.stringify({ outcome: await one(cmd.key, cmd.body) }) + '\n');
    } else if (cmd.op === 'hold') {
      let inside, release;
      const entered = new Promise((r) => { inside = r; });
      held = { key: cmd.key, entered: false, inside, wait: new Promise((r) => { release = r; }) };
      held.release = release;
      held.done = one(cmd.key, body);
      await entered;
      process.stdout.write(JSON.stringify({ ok: true }) + '\n');
    } else if (cmd.op === 'release') {
      held.release();
      const outcome = await held.done;
      held = null;
      process.stdout.write(JSON.stringify({ outcome }) + '\n');
    } else if (cmd.op === 'quit') {
      break;
    } else {
      throw new Error('unknown op ' + cmd.op);
    }
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }) + '\n');
  }
}
process.exit(0);
