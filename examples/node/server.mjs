// An HTTP handler for partq in Node.js, with node's own http module only.
//
//     FOLLOWUP_QUEUE=squares PORT=8080 node examples/node/server.mjs
//     partq worker numbers --handler http:http://127.0.0.1:8080/
//
// It does what examples/python/handler.py does, over HTTP instead of stdin
// and stdout: for an item whose payload is JSON like {"n": 5}, it answers the
// result "25" (what `partq wait` prints) and, when FOLLOWUP_QUEUE is set,
// enqueues {"n": 25} into that queue, keyed like the item. partq applies both
// in the transaction that acknowledges the item, so they happen exactly once.
// A payload that is not such JSON can never succeed: it is dead-lettered at
// once (dead: true) instead of being retried.
//
// The protocol (docs/handler-protocol.md): partq POSTs one JSON request per
// batch of items and reads the reply from the response body (200,
// application/json). Any other answer fails the whole batch; 429 or 503 with
// Retry-After asks partq to come back later. GET /healthz answers 200, for a
// readiness probe. It logs to stderr and stops on SIGTERM (or SIGINT) once
// the batches it is answering are done.
import http from 'node:http';

const PORT = Number(process.env.PORT ?? 8080);
// Localhost only by default: partq is the only client. In a Kubernetes pod,
// LISTEN_HOST=0.0.0.0 lets the kubelet's probes reach /healthz (they connect
// to the pod's IP, not to localhost).
const LISTEN_HOST = process.env.LISTEN_HOST || '127.0.0.1';
const FOLLOWUP_QUEUE = process.env.FOLLOWUP_QUEUE ?? '';
// A request larger than this is refused (partq's own replies are capped at 16 MiB).
const MAX_REQUEST_BYTES = 64 << 20;

function log(...args) {
  console.error('server.mjs:', ...args);
}

function payloadText(item) {
  if (item.payload_encoding === 'base64') {
    // Bytes that are not UTF-8: they cannot be our JSON, and the decoder
    // below says so instead of replacing them.
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(item.payload, 'base64'));
  }
  return item.payload;
}

// The reply for one item: {id, ok: true, ...} or {id, ok: false, error, dead}.
function handle(item) {
  let n;
  try {
    n = JSON.parse(payloadText(item)).n;
    // Item ids are below 2^53, but n is the user's: past 2^53 a Number is
    // no longer exact, so such an n is refused rather than squared wrongly.
    if (!Number.isSafeInteger(n)) throw new Error('n must be an integer below 2^53');
  } catch (e) {
    // Retrying cannot fix the payload: give up now.
    return { id: item.id, ok: false, error: `bad payload: ${e.message}`, dead: true };
  }
  const square = BigInt(n) * BigInt(n);  // exact, however large
  log(`item ${item.id} (attempt ${item.attempt}): ${n}^2 = ${square}`);
  const reply = { id: item.id, ok: true, result: String(square) };
  if (FOLLOWUP_QUEUE) {
    // Written by hand: JSON.stringify cannot write a BigInt.
    reply.enqueue = [{ queue: FOLLOWUP_QUEUE, payload: `{"n": ${square}}`, key: item.key }];
  }
  return reply;
}

let stopping = false;

function send(res, status, type, body, headers = {}) {
  // While stopping, each answer closes its connection (Node 18 would keep
  // it alive, and the server open with it).
  if (stopping) headers = { ...headers, Connection: 'close' };
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function onBatch(req, res, body) {
  let request;
  try {
    request = JSON.parse(body);
  } catch (e) {
    return send(res, 400, 'text/plain', `not JSON: ${e.message}\n`);
  }
  if (request.version !== 1) {
    log(`unsupported protocol version ${request.version}`);
    return send(res, 400, 'text/plain', `unsupported protocol version ${request.version}\n`);
  }
  // Items can come more than once (after a crash, or when another item of
  // their batch failed): key side effects of your own by item id. The
  // Idempotency-Key names the batch's items.
  log(`batch ${request.batch} (Idempotency-Key ${req.headers['idempotency-key'] ?? 'none'}):`,
      `${request.items.length} item(s)`);
  const reply = { version: 1, batch: request.batch, results: request.items.map(handle) };
  send(res, 200, 'application/json', JSON.stringify(reply));
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return send(res, 200, 'text/plain', 'ok\n');
  if (req.method !== 'POST') return send(res, 405, 'text/plain', 'POST a batch\n', { Allow: 'POST' });
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    if (res.headersSent) return;
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES) {
      // Answer, then drop the connection rather than read the rest.
      res.on('finish', () => req.destroy());
      send(res, 413, 'text/plain', 'request too large\n', { Connection: 'close' });
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (res.headersSent) return;
    try {
      onBatch(req, res, Buffer.concat(chunks).toString('utf8'));
    } catch (e) {
      // A bug here fails the batch (partq runs its items again, alone),
      // not the server.
      log(`error: ${e.stack}`);
      send(res, 500, 'text/plain', `handler error: ${e.message}\n`);
    }
  });
});

function stop(signal) {
  if (stopping) return;
  stopping = true;
  log(`${signal}: stopping`);
  // Finish the batches in flight, take no new ones; idle keep-alive
  // connections are closed at once (server.close alone waits for them on
  // Node 18).
  server.close(() => {
    log('stopped');
    process.exit(0);
  });
  server.closeIdleConnections();
  setTimeout(() => process.exit(1), 10000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

server.listen(PORT, LISTEN_HOST, () => {
  log(`ready on http://${LISTEN_HOST}:${server.address().port}/ (pid ${process.pid},`,
      `follow-ups to ${FOLLOWUP_QUEUE || 'nowhere'})`);
});
