/**
 * Seeds instances into one account of a Nimbus SQLite store, for the list benchmark in
 * bench/instances.mjs (which imports `seedInstances`); it can also be run on its own:
 *
 *   node bench/seed-instances.mjs --data-dir DIR --account ACCOUNT_ID [--count 1000000]
 *
 * The data dir must hold a Nimbus database with that account in it (start the server on it once). The
 * schema is brought up to date through the repository's own store code (dist/platform/store/db.js: openStore,
 * migrateToLatest; run `npm run build` first); the rows are then written with better-sqlite3 directly,
 * prepared statements, one transaction per 50,000 instances, with the secondary indexes built after the
 * rows (from the SQL the migration created them with), which is what makes a million rows take well
 * under two minutes.
 *
 * Rows are what the server writes itself (resources/instances/store.ts insertInstance, resources/instances/service.ts
 * create): ids and MAC addresses from the same functions (dist/platform/domain/ids.js, addresses.js), JSON text
 * for tags and ssh_key_ids, tags mirrored into instance_tags, and instance_counts kept exactly (it is
 * what total_items comes from), checked against a real count at the end. Creation times spread over
 * three years in id order; regions, statuses, types, images and names are drawn from a fixed-seed
 * generator with a realistic spread; names repeat (about 14 instances share each), so sorting by name
 * is meaningful. No GPU types: a region's GPU capacity (64 by default, kept in region_gpu_usage) holds
 * only a few dozen GPU instances. No root volume rows: lists do not read them.
 *
 * Addresses: public IPs count up from 100.64.0.2 per region (unique per region, as the schema asks).
 * Private IPs count up from the region's private network (10.10.0.0/16 for us-east-1, …) per region;
 * a /16 holds only 65,533 addresses, so past that they run on beyond it. The API itself would refuse
 * the 65,534th instance of an account in a region (no free private address), so one account cannot
 * reach a million instances through the API today; the benchmark seeds them anyway, as the issue asks.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => import(pathToFileURL(path.join(ROOT, 'dist', file)).href);

const BATCH = 50_000;
const SPAN_MS = 3 * 365 * 24 * 3600 * 1000;

// Weighted choices: [value, weight].
const REGIONS = [
  ['us-east-1', 40],
  ['us-west-2', 30],
  ['eu-central-1', 20],
  ['ap-northeast-1', 10],
];
const STATUSES = [
  ['running', 70],
  ['stopped', 23],
  ['error', 2],
  ['starting', 2],
  ['stopping', 2],
  ['deleting', 1],
];
const OPERATION = { starting: 'start', stopping: 'stop', deleting: 'delete' };
const CPU_TYPES = [
  ['compute-1x', 10],
  ['compute-2x', 25],
  ['compute-4x', 20],
  ['compute-8x', 10],
  ['compute-16x', 4],
  ['compute-32x', 1],
  ['memory-2x', 6],
  ['memory-4x', 8],
  ['memory-8x', 5],
  ['memory-16x', 2],
  ['memory-32x', 1],
  ['storage-2x', 3],
  ['storage-4x', 2],
  ['storage-8x', 1],
  ['storage-16x', 1],
];
const IMAGES = [
  ['ubuntu-24.04', 40],
  ['ubuntu-22.04', 30],
  ['debian-12', 20],
  ['rocky-9', 10],
];
const ROLES = [
  'web',
  'api',
  'worker',
  'db',
  'cache',
  'queue',
  'batch',
  'etl',
  'search',
  'auth',
  'gateway',
  'ingest',
  'render',
  'train',
  'infer',
  'build',
  'ci-runner',
  'monitor',
  'proxy',
  'mail',
];
const ENVS = ['prod', 'staging', 'dev', 'test'];
const TEAMS = ['platform', 'data', 'ml', 'payments', 'growth', 'infra'];
const PRIVATE_BASES = {
  'us-east-1': '10.10.0.0',
  'us-west-2': '10.20.0.0',
  'eu-central-1': '10.30.0.0',
  'ap-northeast-1': '10.40.0.0',
};

/** mulberry32: a small fixed-seed generator, so every run seeds the same spread. */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function picker(random, table) {
  const total = table.reduce((sum, [, weight]) => sum + weight, 0);
  return () => {
    let r = random() * total;
    for (const [value, weight] of table) {
      r -= weight;
      if (r < 0) return value;
    }
    return table[table.length - 1][0];
  };
}

/** Totals of `n` over the rows, by the value of one column. */
function sumBy(rows, column) {
  const out = {};
  for (const row of rows) out[row[column]] = (out[row[column]] ?? 0) + row.n;
  return out;
}

/**
 * Writes `count` instances for `accountId` into `<dataDir>/nimbus.db`. Returns how long it took, the
 * per-(region, status) counts written, and the verified total.
 */
/**
 * `root`: the checkout whose build's migrations make the schema (this one by default).
 * `monitoringShare`: the share of instances with monitoring on (0.9 by default, as users leave it on);
 * a benchmark of something else sets 0 so the metrics collector does not sample the seeded fleet.
 */
export async function seedInstances({
  dataDir,
  accountId,
  count,
  log = () => {},
  monitoringShare = 0.9,
  root = ROOT,
}) {
  const started = performance.now();
  // The schema of the build that serves the store (`root`: another checkout when a benchmark compares).
  const built = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);
  const { openStore, migrateToLatest } = await built('platform/store/db.js');
  // The migration history: dist/resources.js (the one list of resources); dist/migrations.js in older --base builds.
  const { MIGRATIONS } = await built('resources.js').catch(() => built('migrations.js'));
  const { newId } = await dist('platform/domain/ids.js');
  const { ipToInt, intToIp } = await dist('resources/addresses/addresses.js');

  // The schema, by the server's own migrations (a no-op when the server already ran them).
  const store = openStore({ dataDir });
  try {
    await migrateToLatest(store.db, MIGRATIONS);
  } finally {
    await store.close();
  }

  const db = new Database(path.join(dataDir, 'nimbus.db'));
  try {
    // Seeding is setup, not what is measured: no journal and no fsync while the rows go in (the file is
    // thrown away if this fails), a big page cache for the indexes; WAL again (the server's mode) after.
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576');
    db.pragma('foreign_keys = ON');
    if (!db.prepare('select 1 from accounts where id = ?').get(accountId)) {
      throw new Error(`no account ${accountId} in ${dataDir}`);
    }

    const insertInstance = db.prepare(
      `insert into instances (id, account_id, name, status, operation, operation_at, instance_type, region,
         image, ssh_key_ids, public_ip, private_ip, tags, user_data, encryption_key_id,
         firewall_preset, monitoring, backup_schedule, root_volume_id, version, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const insertTag = db.prepare(
      'insert into instance_tags (instance_id, account_id, key, value) values (?, ?, ?, ?)',
    );
    const addCount = db.prepare(
      `insert into instance_counts (account_id, region, status, count) values (?, ?, ?, ?)
       on conflict (account_id, region, status) do update set count = instance_counts.count + excluded.count`,
    );

    // The secondary indexes are dropped while the rows go in and built again after, from the very SQL
    // the migration created them with (sqlite_master keeps it): one sort per index instead of a million
    // random B-tree inserts (the name index above all). The unique constraints' indexes stay in place.
    const indexes = db
      .prepare(
        "select name, sql from sqlite_master where type = 'index' and sql is not null and tbl_name in ('instances', 'instance_tags')",
      )
      .all();
    for (const index of indexes) db.exec(`drop index "${index.name}"`);

    const random = generator(20261122);
    const region = picker(random, REGIONS);
    const status = picker(random, STATUSES);
    const cpuType = picker(random, CPU_TYPES);
    const image = picker(random, IMAGES);
    const publicNext = Object.fromEntries(REGIONS.map(([r]) => [r, ipToInt('100.64.0.2')]));
    const privateNext = Object.fromEntries(REGIONS.map(([r]) => [r, ipToInt(PRIVATE_BASES[r]) + 2]));

    const counts = new Map();
    let tagRows = 0;
    const start = Date.now() - SPAN_MS;
    const step = SPAN_MS / count;

    const batch = db.transaction((from, to) => {
      const batchCounts = new Map();
      for (let i = from; i < to; i++) {
        const createdMs = Math.floor(start + i * step + random() * step);
        const created = new Date(createdMs);
        const id = newId('instance', created);
        const where = region();
        const type = cpuType();
        const state = status();
        const env = ENVS[Math.floor(random() * ENVS.length)];
        // About 72,000 distinct names for a million instances: most names are shared.
        const name = `${ROLES[Math.floor(random() * ROLES.length)]}-${env}-${Math.floor(random() * 900)}`;
        const tagged = random() < 0.3;
        const tags = tagged ? { env, team: TEAMS[Math.floor(random() * TEAMS.length)] } : {};
        const updatedMs = Math.min(Date.now(), createdMs + Math.floor(random() * 30 * 24 * 3600 * 1000));
        const updated = new Date(updatedMs).toISOString();
        const operation = OPERATION[state] ?? null;
        insertInstance.run(
          id,
          accountId,
          name,
          state,
          operation,
          operation === null ? null : updated,
          type,
          where,
          image(),
          '[]',
          intToIp(publicNext[where]++),
          intToIp(privateNext[where]++),
          JSON.stringify(tags),
          null,
          null,
          random() < 0.8 ? 'ssh-only' : 'web',
          random() < monitoringShare ? 1 : 0,
          random() < 0.2 ? '{"frequency":"daily","retention":7}' : null,
          newId('volume', created),
          1 + Math.floor(random() * 5),
          created.toISOString(),
          updated,
        );
        for (const [key, value] of Object.entries(tags)) {
          insertTag.run(id, accountId, key, value);
          tagRows += 1;
        }
        const countKey = `${where}\u0000${state}`;
        batchCounts.set(countKey, (batchCounts.get(countKey) ?? 0) + 1);
      }
      // The maintained counts move in the same transaction as the rows, as insertInstance keeps them.
      for (const [countKey, n] of batchCounts) {
        const [where, state] = countKey.split('\u0000');
        addCount.run(accountId, where, state, n);
        counts.set(countKey, (counts.get(countKey) ?? 0) + n);
      }
    });

    for (let from = 0; from < count; from += BATCH) {
      const to = Math.min(count, from + BATCH);
      batch(from, to);
      log(`seeded ${to.toLocaleString('en-US')} of ${count.toLocaleString('en-US')} instances`);
    }
    for (const index of indexes) {
      db.exec(index.sql);
      log(`built index ${index.name}`);
    }
    db.pragma('journal_mode = WAL');

    // The maintained counts must match the rows exactly: one full count here, so no request needs one.
    const actual = db
      .prepare('select region, status, count(*) as n from instances where account_id = ? group by 1, 2')
      .all(accountId);
    const kept = db
      .prepare('select region, status, count from instance_counts where account_id = ? and count <> 0')
      .all(accountId);
    const key = (r) => `${r.region}/${r.status}`;
    const actualText = actual
      .map((r) => `${key(r)}=${r.n}`)
      .sort()
      .join(',');
    const keptText = kept
      .map((r) => `${key(r)}=${r.count}`)
      .sort()
      .join(',');
    if (actualText !== keptText) {
      throw new Error(
        `instance_counts does not match the rows:\n  rows:   ${actualText}\n  counts: ${keptText}`,
      );
    }
    const total = actual.reduce((sum, r) => sum + r.n, 0);
    const distinctNames = db
      .prepare('select count(distinct name) as n from instances where account_id = ?')
      .get(accountId).n;
    return {
      seconds: (performance.now() - started) / 1000,
      total,
      tagRows,
      distinctNames,
      byRegion: sumBy(actual, 'region'),
      byStatus: sumBy(actual, 'status'),
    };
  } finally {
    db.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      'data-dir': { type: 'string' },
      account: { type: 'string' },
      count: { type: 'string', default: '1000000' },
    },
  });
  if (!values['data-dir'] || !values.account) {
    process.stderr.write('Usage: node bench/seed-instances.mjs --data-dir DIR --account ID [--count N]\n');
    process.exit(2);
  }
  const result = await seedInstances({
    dataDir: path.resolve(values['data-dir']),
    accountId: values.account,
    count: Number(values.count),
    log: (message) => process.stderr.write(`[seed] ${message}\n`),
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
