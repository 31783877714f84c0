// node-rate-limiter-flexible (RateLimiterPostgres: one upsert per decision)
// on balde's PostgreSQL, under bench/peers' workloads (peers_test.go): the
// same key spaces, limits and closed-loop callers, 2 s each. Prints one
// line per workload, in the Go benchmark format, for docs/BENCHMARKS.md.
//
// Run: npm ci && node bench.js (PGURL, default the test database).
'use strict';
const { Pool } = require('pg');
const { RateLimiterPostgres, RateLimiterRes } = require('rate-limiter-flexible');

const url = process.env.PGURL || 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.env.BENCHTIME_S || 2);

const workloads = [
  { name: '1key/callers=8', keys: 1, points: 1e12, duration: 1, callers: 8 },
  { name: '1Mkeys/callers=8', keys: 1e6, points: 1e12, duration: 1, callers: 8 },
  { name: '1Mkeys/callers=32', keys: 1e6, points: 1e12, duration: 1, callers: 32 },
  { name: 'inbound10k/callers=8', keys: 1e4, points: 120, duration: 60, callers: 8 },
];

function newLimiter(pool, w) {
  return new Promise((resolve, reject) => {
    const l = new RateLimiterPostgres({
      storeClient: pool, tableName: 'rlflx_bench', points: w.points, duration: w.duration,
      clearExpiredByTimeout: false,
    }, (err) => (err ? reject(err) : resolve(l)));
  });
}

async function run(w) {
  const pool = new Pool({ connectionString: url, max: w.callers });
  await pool.query('DROP TABLE IF EXISTS rlflx_bench');
  const l = await newLimiter(pool, w);
  const lat = [];
  let refused = 0;
  const end = Date.now() + seconds * 1000;
  const start = process.hrtime.bigint();
  const caller = async () => {
    while (Date.now() < end) {
      const key = 'u' + String(w.keys === 1 ? 0 : Math.floor(Math.random() * w.keys)).padStart(7, '0');
      const t = process.hrtime.bigint();
      try {
        await l.consume(key, 1);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        refused++;
      }
      lat.push(Number(process.hrtime.bigint() - t) / 1e3);
    }
  };
  await Promise.all(Array.from({ length: w.callers }, caller));
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  await pool.query('DROP TABLE rlflx_bench');
  await pool.end();
  lat.sort((a, b) => a - b);
  const pct = (p) => lat[Math.min(lat.length - 1, Math.floor(lat.length * p))].toFixed(1);
  console.log(`BenchmarkPeers/rlflx-postgres/${w.name} ${lat.length} ${(lat.length / elapsed).toFixed(0)} decisions/s ` +
    `${(100 * refused / lat.length).toFixed(2)} refused-% ${pct(0.5)} p50-µs ${pct(0.99)} p99-µs ${pct(0.999)} p99.9-µs`);
}

(async () => {
  for (const w of workloads) await run(w);
})().catch((e) => { console.error(e); process.exit(1); });
