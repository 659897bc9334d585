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
//   {"op":"quit"}
import { createInterface } from 'node:readline';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { makeIdempotent, IdempotencyConfig } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

let client, handler, floorTable, body;
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

const event = (key) => ({
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
  body,
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
  const persistenceStore = new DynamoDBPersistenceLayer({ tableName: cmd.table, awsSdkV3Client: client });
  // The key is the Idempotency-Key header; the body is validated on replay
  // (a different body under the same key is rejected), as idemkit does.
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'headers."idempotency-key"',
    payloadValidationJmesPath: 'body',
    throwOnNoIdempotencyKey: true,
  });
  handler = makeIdempotent(async (ev) => ({
    statusCode: 201,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ runId: 'run_' + ev.requestContext.requestId, status: 'accepted' }),
  }), { persistenceStore, config });
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
