// node-rate-limiter-flexible on balde's two engines, under bench/peers'
// workloads (peers_test.go): the same key spaces, limits and closed-loop
// callers, 2 s each. Prints one line per workload, in the Go benchmark
// format, for docs/BENCHMARKS.md.
//
//   - rlflx-postgres: RateLimiterPostgres (pg), one upsert per decision, on
//     balde's PostgreSQL; a pool of as many connections as callers, so up to
//     that many upserts are in flight in the server at once.
//   - rlflx-sqlite: RateLimiterSQLite (better-sqlite3), one upsert in a
//     transaction per decision, on a new SQLite file in a temporary
//     directory (WAL, synchronous=NORMAL, busy_timeout 5 s: balde's own
//     SQLite settings), deleted at the end. NORMAL is what better-sqlite3,
//     built with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1, gives a connection that
//     opens a file already in WAL, i.e. an application's every start but
//     its first; the connection that switches a new file to WAL keeps FULL
//     (an fsync per commit), hence the pragma. better-sqlite3 is synchronous:
//     each decision runs to its commit on node's one thread, so the callers
//     take turns and only one decision is in the database at a time.
//
// In both, a caller is an async loop awaiting one consume() after another
// (node runs JavaScript on one thread): the callers' decisions interleave
// at their awaits, and a decision's latency includes its wait behind the
// other callers'.
//
// Run: npm ci && node bench.js (PGURL, default the test database). The
// SQLite rows need better-sqlite3, an optional dependency whose install
// script downloads its native module or compiles it: if that failed,
// npm ci goes on without it and the SQLite rows are skipped, saying so on
// stderr.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Pool } = require('pg');
const { RateLimiterPostgres, RateLimiterSQLite, RateLimiterRes } = require('rate-limiter-flexible');

const url = process.env.PGURL || 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.env.BENCHTIME_S || 2);

const workloads = [
  { name: '1key/callers=8', keys: 1, points: 1e12, duration: 1, callers: 8 },
  { name: '1Mkeys/callers=8', keys: 1e6, points: 1e12, duration: 1, callers: 8 },
  { name: '1Mkeys/callers=32', keys: 1e6, points: 1e12, duration: 1, callers: 32 },
  { name: 'inbound10k/callers=8', keys: 1e4, points: 120, duration: 60, callers: 8 },
];

// A store opens a limiter for workload w on a new, empty table and closes
// it (dropping the table, or deleting the file) after the run.
const postgres = {
  name: 'rlflx-postgres',
  async open(w) {
    const pool = new Pool({ connectionString: url, max: w.callers });
    await pool.query('DROP TABLE IF EXISTS rlflx_bench');
    const limiter = await newLimiter(RateLimiterPostgres, { storeClient: pool }, w);
    const close = async () => {
      await pool.query('DROP TABLE rlflx_bench');
      await pool.end();
    };
    return { limiter, close };
  },
};

function sqlite(Database) {
  return {
    name: 'rlflx-sqlite',
    async open(w) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlflx-bench-'));
      let db;
      const close = async () => {
        if (db) db.close();
        fs.rmSync(dir, { recursive: true, force: true });
      };
      try {
        db = new Database(path.join(dir, 'rlflx.db'), { timeout: 5000 });
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = NORMAL');
        const limiter = await newLimiter(RateLimiterSQLite, { storeClient: db, storeType: 'better-sqlite3' }, w);
        return { limiter, close };
      } catch (e) {
        await close();
        throw e;
      }
    },
  };
}

function newLimiter(Limiter, store, w) {
  return new Promise((resolve, reject) => {
    const l = new Limiter({
      ...store, tableName: 'rlflx_bench', points: w.points, duration: w.duration,
      clearExpiredByTimeout: false,
    }, (err) => (err ? reject(err) : resolve(l)));
  });
}

async function run(store, w) {
  const { limiter, close } = await store.open(w);
  const lat = [];
  let refused = 0;
  let elapsed;
  try {
    const end = Date.now() + seconds * 1000;
    const start = process.hrtime.bigint();
    const caller = async () => {
      while (Date.now() < end) {
        const key = 'u' + String(w.keys === 1 ? 0 : Math.floor(Math.random() * w.keys)).padStart(7, '0');
        const t = process.hrtime.bigint();
        try {
          await limiter.consume(key, 1);
        } catch (e) {
          if (!(e instanceof RateLimiterRes)) throw e;
          refused++;
        }
        lat.push(Number(process.hrtime.bigint() - t) / 1e3);
      }
    };
    await Promise.all(Array.from({ length: w.callers }, caller));
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  } finally {
    await close();
  }
  lat.sort((a, b) => a - b);
  const pct = (p) => lat[Math.min(lat.length - 1, Math.floor(lat.length * p))].toFixed(1);
  console.log(`BenchmarkPeers/${store.name}/${w.name} ${lat.length} ${(lat.length / elapsed).toFixed(0)} decisions/s ` +
    `${(100 * refused / lat.length).toFixed(2)} refused-% ${pct(0.5)} p50-µs ${pct(0.99)} p99-µs ${pct(0.999)} p99.9-µs`);
}

// stores is PostgreSQL, then SQLite if better-sqlite3 loads.
function stores() {
  const s = [postgres];
  try {
    s.push(sqlite(require('better-sqlite3')));
  } catch (e) {
    console.error(`bench.js: better-sqlite3 did not load, rlflx-sqlite rows skipped: ${e.message.split('\n')[0]}`);
  }
  return s;
}

(async () => {
  for (const store of stores()) {
    for (const w of workloads) await run(store, w);
  }
})().catch((e) => { console.error(e); process.exit(1); });
