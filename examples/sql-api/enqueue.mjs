// Enqueue into a partq queue from Node.js, through the pg driver (npm: pg).
//
// The items are written in the transaction of your own connection: they
// exist, and the workers are woken, exactly when it commits. Connection
// settings come from the PG* variables (PGHOST, PGPORT, PGUSER, PGDATABASE,
// PGPASSWORD); partq's schema from $PARTQ_SCHEMA (default "partq").
//
//   npm ci && node enqueue.mjs orders
import pg from 'pg';

const queue = process.argv[2] ?? 'orders';
const schema = process.env.PARTQ_SCHEMA ?? 'partq';
// An identifier, quoted; the values below are bound parameters.
const s = `"${schema.replaceAll('"', '""')}"`;

const client = new pg.Client();
await client.connect();
try {
  await client.query('BEGIN');
  const order = { order: 1001, customer: 'c-42', amount: 19.5 };
  // enqueue_item returns (id, part, duplicate); enqueue() just the id.
  // Named arguments (=>) skip the optional ones.
  const enqueueOrder = () =>
    client.query(`SELECT * FROM ${s}.enqueue_item($1, $2, key => $3, dedup_key => $4)`, [
      queue, JSON.stringify(order), order.customer, 'order-1001']);
  let r = (await enqueueOrder()).rows[0];
  console.log(`item ${r.id} part ${r.part} duplicate ${r.duplicate}`);
  // The same dedup key while that item is live: the same item.
  r = (await enqueueOrder()).rows[0];
  console.log(`item ${r.id} part ${r.part} duplicate ${r.duplicate}`);
  const item = r.id;
  // A Buffer is sent as bytes: say bytea, or PostgreSQL takes the text
  // overload and wants UTF-8.
  const b = await client.query(
    `SELECT ${s}.enqueue($1, $2::bytea, priority => $3, delay => $4) AS id`,
    [queue, Buffer.from([0x00, 0xff, 0x72, 0x61, 0x77]), -1, '5 minutes']);
  console.log(`bytes item ${b.rows[0].id}`);
  // Many at once: enqueue_many takes an array of payloads (and, optionally,
  // one key and one dedup key per payload, null for none), one call for the
  // lot. pg sends a JS array untyped: say text[] (or bytea[] for Buffers).
  const orders = [1002, 1003, 1004].map((n) => JSON.stringify({ order: n }));
  const many = await client.query(
    `SELECT id FROM ${s}.enqueue_many($1, $2::text[], keys => $3::text[])`,
    [queue, orders, ['c-7', null, 'c-7']]);
  console.log(`many items ${many.rows.map((row) => row.id).join(' ')}`);
  await client.query('COMMIT');

  // A transaction that rolls back leaves no item behind.
  await client.query('BEGIN');
  await client.query(`SELECT ${s}.enqueue($1, $2)`, [queue, 'never']);
  await client.query('ROLLBACK');
  console.log('rolled back');

  // Errors are PostgreSQL errors: SQLSTATE 42704 for an unknown queue, 22023
  // for a bad argument, 40001 (retry) for a conflict.
  try {
    await client.query(`SELECT ${s}.enqueue($1, $2)`, ['no-such-queue', 'x']);
  } catch (e) {
    console.log(`error ${e.code}: ${e.message}`);
  }

  const st = await client.query(`SELECT state, attempts FROM ${s}.item_state($1, $2)`,
    [queue, item]);
  console.log(`item ${item} is ${st.rows[0].state}`);
} finally {
  await client.end();
}
