#!/usr/bin/env node
// Drives a peer queue for `partq bench` (issue 51): Graphile Worker 0.16.6 or pg-boss 9.0.3,
// on the PostgreSQL named by the libpq variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
// PGDATABASE; node-postgres reads them), and prints ONE line of JSON on stdout. Everything
// else (progress, the libraries' logs, errors) goes to stderr.
//
//   node bench/peers/peer.mjs SYSTEM MODE [--schema NAME] [--shape best|default]
//                             [--timeout S] [options]
//     SYSTEM: graphile_worker | pg_boss
//     MODE:   drain   --items N --workers W [--result] [--batch B]
//             steady  --rate R --seconds S --workers W [--senders C]
//             pickup  --samples N --workers W
//   Exit 0 with the JSON (also when duplicates or missing > 0: the caller judges), 2 for bad
//   arguments, 1 for a runtime failure or when --timeout (default 600 s) runs out.
//
// Modules. The npm packages pinned by package-lock.json beside this file are installed by
// `tools/setup npm bench/peers` (which prints the directory whose node_modules holds them);
// this file is run from the source tree, not from there. ESM `import` ignores NODE_PATH, so
// graphile-worker, pg-boss and pg are loaded with createRequire from the directory in
// PARTQ_PEERS_NODE_MODULES (a node_modules directory), else from the entries of NODE_PATH.
// Node.js 18 is enough (Debian 12): nothing newer than its features is used.
//
// Schemas. --schema NAME (default bench_graphile_worker / bench_pg_boss) is the system's own
// schema: dropped (DROP SCHEMA ... CASCADE) and migrated anew by the system at every start,
// with NAME_results (the --result rows: results(item_id bigint, done_at timestamptz)).
//
// Items. Every item carries a numeric id 0..N-1 in its payload ({"id": i}). Handlers do
// nothing but record the id and when they started (and, with --result, insert its results
// row); the sender keeps its own times.
//
// What each shape does (W = --workers):
//   graphile_worker (docs: worker.graphile.org, the 0.16.6 tag of graphile/worker,
//   website/docs/library/run.md, performance.md, tasks.md "Handling batch jobs"):
//     default: run({pgPool, concurrency: W}) with its defaults: LISTEN "jobs:insert" for new
//       jobs, pollInterval 2000 ms, prepared statements; one job per item (getJob, task,
//       completeJob: two statements per item). Our pg.Pool has max(10, W + 2) connections
//       (node-postgres's default 10; W jobs, the LISTEN client and ours), both shapes.
//     best:    the same runner, but drain loads "batch jobs" (a payload that is an array of
//       items, documented since 0.14; B items per job, --batch, default 100), so one
//       getJob/completeJob pair covers B items. 0.16.6 has no other throughput setting:
//       localQueue, completeJobBatchDelay/failJobBatchDelay and the JS addJobs() arrived in
//       0.17; jobKeyMode only governs job_key replacement. Steady and pickup are one job per
//       item in both shapes (nothing in 0.16.6 lowers latency below LISTEN).
//     The load is SQL add_jobs(job_spec[]) (documented in sql-add-job.md and used by the
//     0.16.6 perfTest/init.js) in chunks of 10,000 items. Results: the task inserts with
//     helpers.withPgClient, another connection than the one completeJob uses, so the row is
//     NOT in the job's completion transaction ("result_in_ack_transaction": false).
//     Done by its account: no job of the task left in its jobs table (completed jobs are
//     deleted).
//   pg_boss (docs: docs/readme.md at the 9.0.3 tag of timgit/pg-boss; test/speedTest.js):
//     default: work(queue, {teamSize: 5000, teamConcurrency: W}, handler) with the default
//       newJobCheckInterval (2000 ms): pg-boss's own polling loop, one callback and one
//       complete() per job, at most W callbacks at once; the same in steady and pickup.
//       teamSize is "how many jobs can be fetched per polling interval": left at W, pg-boss 9
//       cannot go above W jobs per 2 s (W=4: 100,000 items in 14 hours), so it is the same
//       5,000 the best shape fetches. Results: inserted by the handler before pg-boss
//       completes the job in a statement of its own: not in the completion transaction.
//     best:    drain: W concurrent loops of fetch(queue, B) (B = --batch, default 5000) and
//       one complete([ids]) of the whole batch (readme "fetch(name, batchSize)" batching
//       example; speedTest.js fetches and completes 10,000 at once). With --result the
//       batch's rows and complete(ids, null, {db}) run in one transaction of ours
//       ("result_in_ack_transaction": true). Steady and pickup: W work() workers, each
//       {batchSize: 5000, newJobCheckInterval: 100} (100 ms is the documented minimum;
//       batchSize: one callback and one complete per fetched batch), started 100/W ms apart
//       so their polls interleave as independent processes' would.
//     Load: insert([jobs]) in chunks of 10,000. Done by its account: N rows of the queue in
//     state 'completed' in its job table.
//
// Modes:
//   drain:  N items loaded untimed and committed, then W workers start; timed from their
//           start until handlers saw every id AND the system's account says all are done;
//           then, once, every id 0..N-1 seen exactly once (duplicates, missing).
//   steady: a producer process (a fork of this script, so it does not share the workers'
//           event loop) sends --rate items a second for --seconds as partq bench's own
//           producers do: every 10 ms, the items due by then in one call (graphile
//           add_jobs(job_spec[]) in SQL, pg-boss insert([jobs])), one job per item; more
//           calls at once (up to --senders, default 8) while it falls behind its schedule
//           and they help. Latency per item = handler start - the commit of its call (the
//           producer's clock when it returned), as partq's are from the enqueue's commit;
//           kept_up when all were done within 10 s after the producer ended; rate_reached
//           when it sent at >= 98% of --rate.
//   pickup: an idle fleet of W workers; N times, 200 ms apart, one job is sent and timed from
//           just before the send to its handler's start.
// PARTQ_PEERS_DEBUG=1 also logs more latency percentiles to stderr.
import { createRequire } from 'node:module'
import { fork } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'

const SELF = fileURLToPath(import.meta.url)
const TASK = 'bench_item' // graphile-worker task identifier
const QUEUE = 'benchitem' // pg-boss queue (fetch() matches names with LIKE: no '_')
const LOAD_CHUNK = 10000
const GRAPHILE_BEST_BATCH = 100
const PGBOSS_BATCH = 5000
const PGBOSS_DEFAULT_TEAM_SIZE = 5000
const PGBOSS_MIN_INTERVAL_MS = 100
const KEPT_UP_GRACE_MS = 10000
const PICKUP_GAP_MS = 200
const PICKUP_SAMPLE_TIMEOUT_MS = 30000
const STALL_MS = 30000
const LAG_MS = 20
const TICK_MS = 10
const SENDER_WINDOW_MS = 250

// Everything but the result line goes to stderr, whatever the libraries call.
console.log = console.error
console.info = console.error
const log = (...a) => console.error('peer:', ...a)

class UsageError extends Error {}

const USAGE = `usage: node peer.mjs SYSTEM MODE [--schema NAME] [--shape best|default] [--timeout S] [options]
  SYSTEM: graphile_worker | pg_boss
  MODE:
    drain   --items N --workers W [--result] [--batch B]
    steady  --rate R --seconds S --workers W [--senders C]
    pickup  --samples N --workers W`

const nowUs = () => (performance.timeOrigin + performance.now()) * 1000
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const quoteIdent = s => `"${s}"`

// ---------------------------------------------------------------------------------------
// Arguments

const MODE_OPTIONS = {
  drain: { required: ['items', 'workers'], optional: ['result', 'batch'] },
  steady: { required: ['rate', 'seconds', 'workers'], optional: ['senders'] },
  pickup: { required: ['samples', 'workers'], optional: [] }
}
const COMMON_OPTIONS = ['schema', 'shape', 'timeout']
const FLAGS = new Set(['result'])
const INTEGER_OPTIONS = new Set(['items', 'workers', 'batch', 'rate', 'seconds', 'senders', 'samples', 'timeout'])

function parseArgs (argv) {
  if (argv.length < 2) throw new UsageError('SYSTEM and MODE are required')
  const [system, mode, ...rest] = argv
  if (!SYSTEMS[system]) throw new UsageError(`unknown SYSTEM '${system}' (graphile_worker or pg_boss)`)
  if (!MODE_OPTIONS[mode]) throw new UsageError(`unknown MODE '${mode}' (drain, steady or pickup)`)
  const allowed = new Set([...COMMON_OPTIONS, ...MODE_OPTIONS[mode].required, ...MODE_OPTIONS[mode].optional])
  const o = { system, mode, shape: 'best', schema: SYSTEMS[system].defaultSchema, timeout: 600, result: false }
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]
    const m = /^--([a-z]+)(?:=(.*))?$/.exec(a)
    if (!m) throw new UsageError(`unexpected argument '${a}'`)
    const name = m[1]
    if (!allowed.has(name)) throw new UsageError(`--${name} is not an option of ${mode}`)
    if (FLAGS.has(name)) {
      if (m[2] !== undefined) throw new UsageError(`--${name} takes no value`)
      o[name] = true
      continue
    }
    let value = m[2]
    if (value === undefined) {
      if (i + 1 >= rest.length) throw new UsageError(`--${name} needs a value`)
      value = rest[++i]
    }
    if (INTEGER_OPTIONS.has(name)) {
      if (!/^[1-9][0-9]*$/.test(value) || !Number.isSafeInteger(Number(value))) {
        throw new UsageError(`--${name} must be a positive integer, not '${value}'`)
      }
      o[name] = Number(value)
    } else {
      o[name] = value
    }
  }
  for (const r of MODE_OPTIONS[mode].required) {
    if (o[r] === undefined) throw new UsageError(`${mode} needs --${r}`)
  }
  if (o.shape !== 'best' && o.shape !== 'default') throw new UsageError(`--shape must be best or default, not '${o.shape}'`)
  if (!/^[a-z_][a-z0-9_]*$/.test(o.schema)) throw new UsageError(`--schema must match [a-z_][a-z0-9_]*, not '${o.schema}'`)
  const maxSchema = SYSTEMS[system].maxSchema
  if (o.schema.length > maxSchema) throw new UsageError(`--schema is longer than ${maxSchema} characters (${system}, and NAME_results must fit in 63)`)
  if (o.batch !== undefined && o.shape !== 'best') throw new UsageError('--batch applies to --shape best only')
  if (o.items !== undefined && o.items > 2 ** 31 - 1) throw new UsageError('--items is too large')
  if (mode === 'steady' && o.rate * o.seconds > 10000000) throw new UsageError('--rate x --seconds is too large (at most 10,000,000 items)')
  return o
}

// ---------------------------------------------------------------------------------------
// Modules and connections

function loadModules () {
  const dirs = []
  if (process.env.PARTQ_PEERS_NODE_MODULES) dirs.push(process.env.PARTQ_PEERS_NODE_MODULES)
  else if (process.env.NODE_PATH) dirs.push(...process.env.NODE_PATH.split(path.delimiter).filter(Boolean))
  if (dirs.length === 0) {
    throw new Error('neither PARTQ_PEERS_NODE_MODULES nor NODE_PATH names the node_modules of `tools/setup npm bench/peers`')
  }
  const req = createRequire(SELF)
  const load = name => {
    let resolved
    try {
      resolved = req.resolve(name, { paths: dirs })
    } catch (e) {
      throw new Error(`cannot find '${name}' in ${dirs.join(path.delimiter)} (run tools/setup npm bench/peers)`)
    }
    return req(resolved)
  }
  const version = name => JSON.parse(fs.readFileSync(req.resolve(`${name}/package.json`, { paths: dirs }), 'utf8')).version
  return { load, version }
}

// node-postgres reads PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE (and PGSSLMODE) itself
// for whatever is left undefined here.
function connectionFromEnv () {
  const env = process.env
  const c = {
    host: env.PGHOST || undefined,
    port: env.PGPORT ? Number(env.PGPORT) : undefined,
    user: env.PGUSER || undefined,
    password: env.PGPASSWORD || undefined,
    database: env.PGDATABASE || env.PGUSER || os.userInfo().username
  }
  for (const k of Object.keys(c)) if (c[k] === undefined) delete c[k]
  return c
}

function makePool (pg, max) {
  const pool = new pg.Pool({ ...connectionFromEnv(), max })
  pool.on('error', e => log('idle connection error:', e.message))
  return pool
}

async function dropSchemas (pool, schema) {
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`)
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema + '_results')} CASCADE`)
}

async function createResults (pool, schema) {
  const s = quoteIdent(schema + '_results')
  await pool.query(`CREATE SCHEMA ${s}`)
  await pool.query(`CREATE TABLE ${s}.results (item_id bigint NOT NULL, done_at timestamptz NOT NULL)`)
}

const resultsTable = schema => `${quoteIdent(schema + '_results')}.results`

// ---------------------------------------------------------------------------------------
// Graphile Worker 0.16.6

function graphileLogger (gw) {
  return new gw.Logger(scope => (level, message) => {
    // Its per-job "Completed task" info line is dropped here (formatted all the same unless
    // NO_LOG_SUCCESS is set, as the best shape does).
    if (level === 'debug' || (level === 'info' && message.startsWith('Completed task'))) return
    process.stderr.write(`graphile-worker ${level}: ${message}\n`)
  })
}

function makeGraphile (mods, o) {
  const pg = mods.load('pg')
  const gw = mods.load('graphile-worker')
  const version = mods.version('graphile-worker')
  const logger = graphileLogger(gw)
  const s = quoteIdent(o.schema)
  const batch = o.mode === 'drain' && o.shape === 'best' ? (o.batch || GRAPHILE_BEST_BATCH) : 1
  let pool, runner, utils, utilsPool
  // As 0.16.6's perfTest/run.js does: no per-job success log line (read by worker.js).
  if (o.shape === 'best') process.env.NO_LOG_SUCCESS = '1'

  return {
    version,
    itemsPerJob: batch,
    resultInAckTransaction: false,
    settings: `run({concurrency: ${o.workers}}), LISTEN, pollInterval 2000` +
      (o.shape === 'best' ? ', NO_LOG_SUCCESS' : '') +
      (batch > 1 ? `; batch jobs of ${batch} items` : '; one job per item'),

    async setup () {
      pool = makePool(pg, Math.max(10, o.workers + 2))
      await dropSchemas(pool, o.schema)
      await gw.runMigrations({ pgPool: pool, schema: o.schema, logger })
      if (o.result) await createResults(pool, o.schema)
    },

    // add_jobs(job_spec[]) in chunks; a batch job's payload is the array of its items.
    async load (n) {
      let jobs = 0
      for (let first = 0; first < n; first += LOAD_CHUNK) {
        const last = Math.min(n, first + LOAD_CHUNK) - 1
        const payload = batch > 1
          ? `json_agg(json_build_object('id', i) ORDER BY i)`
          : `json_build_object('id', i)`
        const group = batch > 1 ? `GROUP BY i / ${batch}` : ''
        const r = await pool.query(
          `SELECT count(*)::int AS n FROM ${s}.add_jobs(ARRAY(
             SELECT ROW($3::text, ${payload}, NULL, NULL, NULL, NULL, NULL, NULL)::${s}.job_spec
             FROM generate_series($1::bigint, $2::bigint) AS i ${group}))`,
          [first, last, TASK])
        jobs += r.rows[0].n
      }
      return jobs
    },

    async startWorkers ({ onItem }) {
      const results = resultsTable(o.schema)
      const task = batch > 1
        ? async (payload, helpers) => {
          const t = nowUs()
          const ids = new Array(payload.length)
          for (let i = 0; i < payload.length; i++) {
            ids[i] = payload[i].id
            onItem(ids[i], t)
          }
          if (o.result) {
            await helpers.withPgClient(c => c.query(`INSERT INTO ${results} SELECT unnest($1::bigint[]), now()`, [ids]))
          }
        }
        : async (payload, helpers) => {
          onItem(payload.id, nowUs())
          if (o.result) {
            await helpers.withPgClient(c => c.query(`INSERT INTO ${results} VALUES ($1, now())`, [payload.id]))
          }
        }
      runner = await gw.run({
        pgPool: pool,
        schema: o.schema,
        concurrency: o.workers,
        noHandleSignals: true,
        logger,
        crontab: '# none\n',
        taskList: { [TASK]: task }
      })
    },

    // Items whose jobs are done: completed jobs are deleted from the jobs table.
    async accountDone (n) {
      const r = await pool.query(
        `SELECT count(*)::int AS jobs,
                coalesce(sum(CASE json_typeof(j.payload) WHEN 'array' THEN json_array_length(j.payload) ELSE 1 END), 0)::int AS items
         FROM ${s}._private_jobs j JOIN ${s}._private_tasks t ON t.id = j.task_id
         WHERE t.identifier = $1`, [TASK])
      return n - r.rows[0].items
    },

    // pickup's sender: WorkerUtils on a pool of its own, connected before the first sample.
    async prepareEnqueue () {
      utilsPool = makePool(pg, 1)
      utils = await gw.makeWorkerUtils({ pgPool: utilsPool, schema: o.schema, logger })
      await utilsPool.query('SELECT 1')
    },

    async enqueue (payload) {
      await utils.addJob(TASK, payload)
    },

    async resultRows () {
      return (await pool.query(`SELECT count(DISTINCT item_id)::int AS n FROM ${resultsTable(o.schema)}`)).rows[0].n
    },

    async close () {
      if (runner) await runner.stop()
      if (utils) await utils.release()
      if (utilsPool) await utilsPool.end()
      if (pool) await pool.end()
    }
  }
}

async function makeGraphileProducer (mods, schema, senders) {
  const pg = mods.load('pg')
  const gw = mods.load('graphile-worker')
  const pool = makePool(pg, senders)
  const utils = await gw.makeWorkerUtils({ pgPool: pool, schema, logger: graphileLogger(gw) })
  await Promise.all(Array.from({ length: senders }, () => pool.query('SELECT 1')))
  // One add_jobs(job_spec[]) a tick: the SQL function the load uses, one statement for
  // every item due (0.16.6's JS addJob takes one job).
  const s = quoteIdent(schema)
  return {
    sendMany: payloads => pool.query(
      `SELECT count(*) FROM ${s}.add_jobs(ARRAY(
         SELECT ROW($1::text, p, NULL, NULL, NULL, NULL, NULL, NULL)::${s}.job_spec
         FROM unnest($2::json[]) AS p))`,
      [TASK, payloads.map(p => JSON.stringify(p))]),
    async close () { await utils.release(); await pool.end() }
  }
}

// ---------------------------------------------------------------------------------------
// pg-boss 9.0.3

function pgBossOptions (schema, max, extra = {}) {
  return { ...connectionFromEnv(), schema, max, ...extra }
}

function makePgBoss (mods, o) {
  const pg = mods.load('pg')
  const PgBoss = mods.load('pg-boss')
  const version = mods.version('pg-boss')
  const s = quoteIdent(o.schema)
  const best = o.shape === 'best'
  const batch = best ? (o.batch || PGBOSS_BATCH) : 1
  let pool, boss
  const loops = []
  let stopping = false
  let loopError = null

  const settings = !best
    ? `work({teamSize: ${PGBOSS_DEFAULT_TEAM_SIZE}, teamConcurrency: ${o.workers}}), newJobCheckInterval 2000 (default); complete per job`
    : o.mode === 'drain'
      ? `${o.workers} fetch loop(s): fetch(${batch}) + complete([ids]) of the batch`
      : `${o.workers} work({batchSize: ${batch}, newJobCheckInterval: ${PGBOSS_MIN_INTERVAL_MS}}) staggered; complete per batch`

  return {
    version,
    itemsPerJob: 1,
    resultInAckTransaction: best,
    settings,

    async setup () {
      const max = Math.max(10, o.workers + 2)
      pool = makePool(pg, max)
      await dropSchemas(pool, o.schema)
      boss = new PgBoss(pgBossOptions(o.schema, max))
      boss.on('error', e => log('pg-boss error:', e.message))
      await boss.start()
      if (o.result) await createResults(pool, o.schema)
    },

    async load (n) {
      for (let first = 0; first < n; first += LOAD_CHUNK) {
        const jobs = []
        for (let i = first; i < Math.min(n, first + LOAD_CHUNK); i++) jobs.push({ name: QUEUE, data: { id: i } })
        await boss.insert(jobs)
      }
      return n
    },

    async startWorkers ({ onItem }) {
      const results = resultsTable(o.schema)
      if (!best) {
        // Per-job callbacks; pg-boss completes each job after its callback resolves.
        await boss.work(QUEUE, { teamSize: PGBOSS_DEFAULT_TEAM_SIZE, teamConcurrency: o.workers }, async job => {
          onItem(job.data.id, nowUs())
          if (o.result) await pool.query(`INSERT INTO ${results} VALUES ($1, now())`, [job.data.id])
        })
        return
      }
      if (o.mode !== 'drain') {
        for (let w = 0; w < o.workers; w++) {
          if (w > 0) await sleep(PGBOSS_MIN_INTERVAL_MS / o.workers)
          await boss.work(QUEUE, { batchSize: batch, newJobCheckInterval: PGBOSS_MIN_INTERVAL_MS }, async jobs => {
            const t = nowUs()
            for (const job of jobs) onItem(job.data.id, t)
          })
        }
        return
      }
      // drain, best: W loops of fetch + one complete of the batch, until the queue is empty.
      const loop = async () => {
        while (!stopping) {
          const jobs = await boss.fetch(QUEUE, batch)
          if (!jobs) return
          const t = nowUs()
          const ids = new Array(jobs.length)
          const items = new Array(jobs.length)
          for (let i = 0; i < jobs.length; i++) {
            ids[i] = jobs[i].id
            items[i] = jobs[i].data.id
            onItem(items[i], t)
          }
          if (!o.result) {
            await boss.complete(ids)
            continue
          }
          const client = await pool.connect()
          try {
            await client.query('BEGIN')
            await client.query(`INSERT INTO ${results} SELECT unnest($1::bigint[]), now()`, [items])
            await boss.complete(ids, null, { db: { executeSql: (text, values) => client.query(text, values) } })
            await client.query('COMMIT')
          } catch (e) {
            await client.query('ROLLBACK').catch(() => {})
            throw e
          } finally {
            client.release()
          }
        }
      }
      for (let w = 0; w < o.workers; w++) {
        loops.push(loop().catch(e => { loopError = loopError || e }))
      }
    },

    async accountDone () {
      if (loopError) throw loopError
      const r = await pool.query(`SELECT count(*)::int AS n FROM ${s}.job WHERE name = $1 AND state = 'completed'`, [QUEUE])
      return r.rows[0].n
    },

    async prepareEnqueue () {},

    async enqueue (payload) {
      await boss.send(QUEUE, payload)
    },

    async resultRows () {
      return (await pool.query(`SELECT count(DISTINCT item_id)::int AS n FROM ${resultsTable(o.schema)}`)).rows[0].n
    },

    async close () {
      stopping = true
      await Promise.all(loops)
      if (boss) await boss.stop({ graceful: false, destroy: true })
      if (pool) await pool.end()
    }
  }
}

async function makePgBossProducer (mods, schema, senders) {
  const PgBoss = mods.load('pg-boss')
  // A sender only: no maintenance or cron checks of its own (noSupervisor, noScheduling).
  const boss = new PgBoss(pgBossOptions(schema, senders, { noSupervisor: true, noScheduling: true }))
  boss.on('error', e => log('pg-boss error (producer):', e.message))
  await boss.start()
  await Promise.all(Array.from({ length: senders }, () => boss.getQueueSize(QUEUE)))
  // One insert([jobs]) a tick: pg-boss's own batch send, as the load uses.
  return {
    sendMany: payloads => boss.insert(payloads.map(data => ({ name: QUEUE, data }))),
    async close () { await boss.stop({ graceful: false, destroy: true }) }
  }
}

const SYSTEMS = {
  graphile_worker: { defaultSchema: 'bench_graphile_worker', maxSchema: 55, make: makeGraphile, producer: makeGraphileProducer },
  pg_boss: { defaultSchema: 'bench_pg_boss', maxSchema: 50, make: makePgBoss, producer: makePgBossProducer }
}

// ---------------------------------------------------------------------------------------
// Accounting

class Seen {
  constructor (n, latencies = false) {
    this.n = n
    this.counts = new Uint32Array(n)
    this.startUs = latencies ? new Float64Array(n).fill(NaN) : null
    this.distinct = 0
    this.outOfRange = 0
    this.lastProgress = performance.now()
    this.waiters = []
  }

  // Called by the handlers: id, the handler's start (epoch µs).
  record (id, startUs) {
    this.lastProgress = performance.now()
    if (!(id >= 0 && id < this.n)) { this.outOfRange++; return }
    if (this.counts[id]++ === 0) {
      this.distinct++
      if (this.startUs) this.startUs[id] = startUs
      if (this.waiters.length) this.wake()
    }
  }

  wake () {
    this.waiters = this.waiters.filter(w => {
      if (!w.test()) return true
      w.resolve()
      return false
    })
  }

  until (test) {
    if (test()) return Promise.resolve()
    return new Promise(resolve => this.waiters.push({ test, resolve }))
  }

  tally () {
    let duplicates = 0, missing = 0
    for (let i = 0; i < this.n; i++) {
      const c = this.counts[i]
      if (c === 0) missing++
      else duplicates += c - 1
    }
    return { duplicates: duplicates + this.outOfRange, missing }
  }
}

function percentiles (values) {
  const v = Float64Array.from(values.filter(x => !Number.isNaN(x))).sort()
  if (process.env.PARTQ_PEERS_DEBUG && v.length) {
    log('latency ms by percentile:', [0.1, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 1].map(p => `${p}:${v[Math.max(0, Math.ceil(p * v.length) - 1)].toFixed(1)}`).join(' '))
  }
  if (v.length === 0) return { samples: 0, p50_ms: null, p99_ms: null, max_ms: null }
  const at = p => v[Math.max(0, Math.ceil(p * v.length) - 1)]
  const r = x => Math.round(x * 1000) / 1000
  return { samples: v.length, p50_ms: r(at(0.5)), p99_ms: r(at(0.99)), max_ms: r(v[v.length - 1]) }
}

// Waits until handlers saw `expected` distinct ids and then until `account()` (the system's
// own count of done items) reaches it too, polling it every `everyMs`; gives up at `deadline`
// (performance.now() ms) or when no handler ran, or the account did not move, for STALL_MS.
// Returns whether both held.
async function settle (seen, expected, account, deadline = Infinity, everyMs = 5) {
  const allSeen = seen.until(() => seen.distinct >= expected)
  let lastDone = -1
  let lastMove = performance.now()
  for (;;) {
    const now = performance.now()
    if (seen.distinct >= expected) {
      // The system's own count must follow; one that stops moving (a job failed and waits
      // for its retry) ends the wait as a stall does.
      const done = await account()
      if (done >= expected) return true
      if (done !== lastDone) {
        lastDone = done
        lastMove = performance.now()
      }
      if (performance.now() >= deadline || performance.now() - lastMove > STALL_MS) return false
      await sleep(everyMs)
      continue
    }
    if (now >= deadline || now - seen.lastProgress > STALL_MS) return false
    await Promise.race([allSeen, sleep(Math.max(1, Math.min(100, deadline - now)))])
  }
}

// ---------------------------------------------------------------------------------------
// Modes

async function drain (sys, o) {
  await sys.setup()
  log(`${o.system} ${o.shape}: loading ${o.items} items`)
  const t0 = performance.now()
  const jobs = await sys.load(o.items)
  log(`loaded ${o.items} items (${jobs} jobs) in ${((performance.now() - t0) / 1000).toFixed(2)} s; starting ${o.workers} workers (${sys.settings})`)
  const seen = new Seen(o.items)
  let accountDone = 0
  const account = async () => (accountDone = await sys.accountDone(o.items))
  const start = performance.now()
  await sys.startWorkers({ onItem: (id, t) => seen.record(id, t) })
  const ok = await settle(seen, o.items, account)
  if (!ok) await account()
  const seconds = (performance.now() - start) / 1000
  if (!ok) log(`drain stalled: handlers saw ${seen.distinct} of ${o.items}, the system counts ${accountDone} done`)
  const { duplicates, missing } = seen.tally()
  const out = {
    system: o.system,
    mode: 'drain',
    shape: o.shape,
    version: sys.version,
    workers: o.workers,
    items: o.items,
    jobs,
    items_per_job: sys.itemsPerJob,
    seconds: round(seconds, 3),
    items_per_s: Math.round(o.items / seconds),
    done: accountDone,
    duplicates,
    missing,
    result: o.result,
    result_in_ack_transaction: sys.resultInAckTransaction,
    settings: sys.settings
  }
  if (o.result) out.result_rows = await sys.resultRows()
  return out
}

async function startProducer (o) {
  const child = fork(SELF, ['__produce'], { stdio: ['ignore', 2, 2, 'ipc'] })
  children.add(child)
  child.on('exit', () => children.delete(child))
  const messages = []
  let waiting = null
  child.on('message', m => { if (waiting) { const w = waiting; waiting = null; w.resolve(m) } else messages.push(m) })
  const exited = new Promise(resolve => child.on('exit', (code, signal) => resolve({ code, signal })))
  const next = () => messages.length
    ? Promise.resolve(messages.shift())
    : Promise.race([
      new Promise((resolve, reject) => { waiting = { resolve, reject } }),
      exited.then(e => { throw new Error(`the producer exited (${e.signal || e.code}) before it answered`) })
    ])
  child.send({ system: o.system, schema: o.schema, rate: o.rate, seconds: o.seconds, senders: o.senders || 8 })
  const ready = await next()
  if (ready.error) throw new Error(`producer: ${ready.error}`)
  return { child, next, exited }
}

async function steady (sys, o) {
  await sys.setup()
  const total = Math.round(o.rate * o.seconds)
  const producer = await startProducer(o)
  const seen = new Seen(total, true)
  let accountDone = 0
  const account = async () => (accountDone = await sys.accountDone(total))
  await sys.startWorkers({ onItem: (id, t) => seen.record(id, t) })
  await sleep(500) // LISTEN connected / first polls done: the fleet is idle and ready
  log(`${o.system} ${o.shape}: producing ${total} items at ${o.rate}/s for ${o.seconds} s (${sys.settings})`)
  producer.child.send({ go: true })
  const report = await producer.next()
  if (report.error) throw new Error(`producer: ${report.error}`)
  const endedAt = performance.now()
  seen.lastProgress = endedAt
  const keptUp = report.sent === total &&
    await settle(seen, total, account, endedAt + KEPT_UP_GRACE_MS, 20)
  const { duplicates, missing } = seen.tally()
  await producer.exited
  // From the commit of the item's batch (the producer's clock when its call returned), as
  // partq's steady rounds count from the enqueue's commit; a handler that started before
  // the producer saw its commit counts 0.
  const latencyMs = []
  for (const [first, last, commitUs] of report.commits) {
    for (let i = first; i < last; i++) {
      if (!Number.isNaN(seen.startUs[i])) latencyMs.push(Math.max(0, seen.startUs[i] - commitUs) / 1000)
    }
  }
  return {
    system: o.system,
    mode: 'steady',
    shape: o.shape,
    version: sys.version,
    workers: o.workers,
    rate: o.rate,
    items: total,
    sent: report.sent,
    seconds: round(report.seconds, 3),
    achieved_rate: Math.round(report.sent / report.seconds),
    done: Math.max(0, accountDone),
    duplicates,
    missing,
    ...percentiles(latencyMs),
    kept_up: keptUp,
    rate_reached: report.sent / report.seconds >= 0.98 * o.rate,
    senders: report.senders,
    settings: sys.settings
  }
}

async function pickup (sys, o) {
  await sys.setup()
  const seen = new Seen(o.samples, true)
  await sys.startWorkers({ onItem: (id, t) => seen.record(id, t) })
  await sys.prepareEnqueue()
  await sleep(1000) // the fleet is idle: LISTEN connected, first polls found nothing
  log(`${o.system} ${o.shape}: ${o.samples} pickups, ${PICKUP_GAP_MS} ms apart (${sys.settings})`)
  let lost = 0
  const sentUs = new Float64Array(o.samples)
  for (let id = 0; id < o.samples; id++) {
    if (id > 0) await sleep(PICKUP_GAP_MS)
    const handled = seen.until(() => seen.counts[id] > 0)
    sentUs[id] = nowUs()
    await sys.enqueue({ id })
    const timer = sleep(PICKUP_SAMPLE_TIMEOUT_MS).then(() => 'timeout')
    if ((await Promise.race([handled, timer])) === 'timeout') {
      lost++
      log(`pickup ${id}: not handled within ${PICKUP_SAMPLE_TIMEOUT_MS} ms`)
    }
  }
  const { duplicates, missing } = seen.tally()
  return {
    system: o.system,
    mode: 'pickup',
    shape: o.shape,
    version: sys.version,
    workers: o.workers,
    items: o.samples,
    done: seen.distinct,
    duplicates,
    missing: Math.max(missing, lost),
    ...percentiles(Array.from(seen.startUs, (t, id) => (t - sentUs[id]) / 1000)),
    settings: sys.settings
  }
}

const round = (x, d) => Math.round(x * 10 ** d) / 10 ** d

// ---------------------------------------------------------------------------------------
// The producer process of steady (hidden mode `__produce`): told what to send over IPC,
// answers {ready}, waits for {go}, sends, answers {sent, seconds}, exits.

async function produce () {
  process.on('disconnect', () => process.exit(1))
  const cfg = await new Promise(resolve => process.once('message', resolve))
  let p
  try {
    // Connected (every sender's connection opened) before it answers ready, so the first
    // sends do not pay for connecting.
    p = await SYSTEMS[cfg.system].producer(loadModules(), cfg.schema, cfg.senders)
    process.send({ ready: true })
  } catch (e) {
    process.send({ error: e.message })
    process.exit(1)
  }
  await new Promise(resolve => process.once('message', resolve))
  const total = Math.round(cfg.rate * cfg.seconds)
  // As partq bench's own producers: every TICK_MS, every item due by then in one call, so
  // a batch's items share its commit. A tick starts when it is due and the one before it
  // was sent; while ticks run late (more than LAG_MS), one more call may be in flight at
  // once, up to --senders, kept only if the next SENDER_WINDOW_MS sent at least 10% more.
  const commits = [] // [first, last, commit µs] per call: a small report, whatever the rate
  let next = 0, sent = 0, failed = null
  const start = performance.now()
  let lastDone = start // when the last call returned: the rate is over the sending alone
  const dueBy = t => Math.min(total, Math.floor(((t - start) / 1000) * cfg.rate))
  let active = 1
  const lane = async k => {
    let tick = 1
    while (failed === null && k < active && next < total) {
      const wait = start + tick * TICK_MS - performance.now()
      if (wait >= 1) await sleep(wait)
      tick = Math.max(tick + 1, Math.ceil((performance.now() - start) / TICK_MS))
      const first = next
      const last = Math.max(first, dueBy(performance.now()))
      if (last === first) continue
      next = last
      const payloads = []
      for (let i = first; i < last; i++) payloads.push({ id: i })
      try {
        await p.sendMany(payloads)
        commits.push([first, last, nowUs()])
        sent += last - first
        lastDone = performance.now()
      } catch (e) {
        failed = e
      }
    }
  }
  const lanes = [lane(0)]
  let lastSent = 0, lastT = start, before = 0, trying = false, settled = false
  while (next < total && failed === null) {
    await sleep(SENDER_WINDOW_MS)
    const now = performance.now()
    const rate = (sent - lastSent) / (now - lastT)
    lastSent = sent
    lastT = now
    if (trying) {
      trying = false
      if (rate < before * 1.1) { active--; settled = true }
    } else if (!settled && active < cfg.senders && dueBy(now) - next > cfg.rate * LAG_MS / 1000) {
      before = rate
      lanes.push(lane(active++))
      trying = true
    }
  }
  await Promise.all(lanes)
  const seconds = (lastDone - start) / 1000
  await p.close().catch(e => log('producer close:', e.message))
  // Disconnect once the report is written, and not as a lost parent (the 'disconnect'
  // handler above).
  const report = failed
    ? { error: `send failed after ${sent} items: ${failed.message}` }
    : { sent, seconds, senders: active, commits }
  process.removeAllListeners('disconnect')
  process.send(report, () => process.disconnect())
}

// ---------------------------------------------------------------------------------------
// Main

const children = new Set()
function killChildren () {
  for (const c of children) c.kill('SIGKILL')
}

async function main () {
  if (process.argv[2] === '__produce') return produce()
  let o
  try {
    o = parseArgs(process.argv.slice(2))
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    // The message last: the bench quotes the last stderr line.
    process.stderr.write(`${USAGE}\npeer.mjs: ${e.message}\n`)
    process.exit(2)
  }
  const timer = setTimeout(() => {
    process.stderr.write(`peer.mjs: timed out after ${o.timeout} s (--timeout)\n`)
    killChildren()
    process.exit(1)
  }, o.timeout * 1000)
  timer.unref()
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => { process.stderr.write(`peer.mjs: ${sig}\n`); killChildren(); process.exit(1) })
  }

  let sys
  let out
  let failure = null
  try {
    sys = SYSTEMS[o.system].make(loadModules(), o)
    out = await { drain, steady, pickup }[o.mode](sys, o)
  } catch (e) {
    failure = e
  }
  try {
    if (sys) await sys.close()
  } catch (e) {
    failure = failure || e
  }
  if (failure) throw failure
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(0)
}

main().catch(e => {
  // The stack, then the message last: the bench quotes the last stderr line.
  if (e && e.stack) process.stderr.write(`${e.stack}\n`)
  process.stderr.write(`peer.mjs: ${e && e.message ? e.message : e}\n`)
  killChildren()
  process.exit(1)
})
