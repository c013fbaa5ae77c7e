/**
 * A diagnostic, not a benchmark: preloaded into a benchmark that drives Nimbus in its own process
 * (`node -r ./bench/sql-timings.cjs bench/snapshot-scheduler.mjs …`), it times every better-sqlite3
 * statement and prints, at exit, the 15 that took longest in all: milliseconds, calls, SQL. The timings
 * include what SQLite does inside the call only (not Kysely, not the commit's wait).
 */
const Database = require('better-sqlite3');

const totals = new Map();
const prepare = Database.prototype.prepare;
Database.prototype.prepare = function timedPrepare(text) {
  const statement = prepare.call(this, text);
  const key = text.replace(/\s+/g, ' ').slice(0, 140);
  for (const method of ['run', 'all', 'get', 'iterate']) {
    const original = statement[method];
    statement[method] = function timed(...args) {
      const started = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        const entry = totals.get(key) ?? { ms: 0, calls: 0 };
        entry.ms += Number(process.hrtime.bigint() - started) / 1e6;
        entry.calls += 1;
        totals.set(key, entry);
      }
    };
  }
  return statement;
};

process.on('exit', () => {
  const top = [...totals.entries()].sort((a, b) => b[1].ms - a[1].ms).slice(0, 15);
  for (const [sql, { ms, calls }] of top) {
    process.stderr.write(`${ms.toFixed(0).padStart(7)} ms ${String(calls).padStart(7)} ${sql}\n`);
  }
});
