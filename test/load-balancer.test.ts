/**
 * Replicas behind a load balancer (issue 18, docs/operations.md "Replicas behind a load balancer"): two
 * `nimbus serve` processes on one PostgreSQL database and one Redis, behind HAProxy terminating TLS and
 * forwarding with X-Forwarded-For/-Proto (NIMBUS_TRUST_PROXY=127.0.0.1). Through the balancer:
 *
 * - the rate budget is shared: an account allowed 30 requests gets 30 answers and then 429s, although
 *   its requests reach both replicas (each alone would have allowed 30);
 * - idempotency is shared: a replay answered by the other replica returns the first answer;
 * - 200 creates, spread over both replicas, all reach running; while both run, each instance was
 *   provisioned and started exactly once (the simulator's call counts, sim_calls) and has exactly one
 *   instance.started event, and boot jobs were leased by both replicas' runners;
 * - one replica is killed with SIGKILL while instances boot: the balancer sends the rest to the other,
 *   which takes over the dead replica's jobs once their leases lapse; every instance still reaches
 *   running with one instance.started event, and none is left starting;
 * - a replica killed during its own start (migrations, bootstrap) leaves nothing that stops the next one
 *   from starting.
 *
 * Needs PostgreSQL, Redis and haproxy; under CI=true all three must be there (the suite fails, never
 * skips). The replicas run the compiled server (dist/), built first when stale.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, HAVE_POSTGRES, HAVE_REDIS, REDIS_URL } from './helpers/backends.js';
import { type ChildServer, ROOT, spawnServer } from './helpers/child-server.js';
import { BIN, baseEnv, ensureBuilt, runNimbus } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import { type Balancer, haproxyBinary, startBalancer } from './helpers/haproxy.js';
import { COMPUTE } from './helpers/instances.js';
import { freePort, type Reply, type RequestOptions, sendRequest } from './helpers/server.js';

const HAPROXY = haproxyBinary();
if (process.env.CI === 'true' && HAPROXY === null) {
  throw new Error(
    "CI=true but haproxy is not installed (npm test's set-up installs the Debian package as root)",
  );
}

const CREATES = 200;
/** Boots take 8 s / SPEEDUP = 1 s: long enough for a kill to land while instances boot. */
const SPEEDUP = 8;
/** The runner's job lease (platform/jobs/runner.ts): how long a dead replica's jobs wait before another takes them. */
const JOB_LEASE_MS = 30_000;

describe.runIf(HAVE_POSTGRES && HAVE_REDIS && HAPROXY !== null)(
  'two replicas behind HAProxy (PostgreSQL + Redis)',
  () => {
    const dirs: string[] = [];
    const replicas = new Map<string, ChildServer>();
    let balancer: Balancer;
    let ca: Buffer;
    let database: { url: string; drop: () => Promise<void> };
    let db: pg.Client;
    let env: Record<string, string>;
    const ports = { a: 0, b: 0 };

    const newDir = () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-lb-'));
      dirs.push(dir);
      return dir;
    };
    /** A request through the balancer. */
    const viaBalancer = (method: string, urlPath: string, options: RequestOptions = {}): Promise<Reply> =>
      sendRequest(balancer.url, ca, method, urlPath, options);
    /** `nimbus admin …` on the shared database. */
    async function admin(...args: string[]): Promise<any> {
      const run = await runNimbus(['admin', ...args, '--json'], {
        env: { ...baseEnv(os.tmpdir()), ...env, NIMBUS_DATA_DIR: newDir() },
      });
      expect(run.code, run.stderr).toBe(0);
      return JSON.parse(run.stdout);
    }
    async function newAccount(perHour: number, burst: number): Promise<string> {
      const made = await admin(
        'create-account',
        '--email',
        `lb-${randomBytes(4).toString('hex')}@example.com`,
        '--plan',
        'enterprise',
      );
      await admin(
        'set-rate-limit',
        '--account',
        made.account_id,
        '--per-hour',
        String(perHour),
        '--burst',
        String(burst),
      );
      return made.api_key as string;
    }
    /**
     * How many of these answers each replica gave: found by the answer's request id in the replica's access
     * log, which reaches its output within 100 ms (platform/log-destination.ts), hence the wait.
     */
    async function whoAnswered(replies: Reply[]): Promise<Record<string, number>> {
      return waitFor(
        'every answer in a replica log',
        () => {
          const tally: Record<string, number> = {};
          for (const reply of replies) {
            const id = `"request_id":"${String(reply.headers['x-request-id'])}"`;
            const name = [...replicas].find(([, replica]) => replica.output().includes(id))?.[0];
            if (name === undefined) return undefined;
            tally[name] = (tally[name] ?? 0) + 1;
          }
          return tally;
        },
        { timeoutMs: 5_000, intervalMs: 50 },
      );
    }

    // The replica picks its own ports, and new ones if another process takes one before it binds.
    async function startReplica(name: string): Promise<ChildServer> {
      const replica = await spawnServer({ dataDir: newDir(), databaseUrl: database.url, env });
      replicas.set(name, replica);
      return replica;
    }

    beforeAll(async () => {
      ensureBuilt();
      database = await createPostgresDatabase();
      db = new pg.Client({ connectionString: database.url });
      await db.connect();
      env = {
        NIMBUS_DATABASE_URL: database.url,
        NIMBUS_REDIS_URL: REDIS_URL,
        // One master key for all: secrets sealed by one replica open on another, and so do list cursors.
        NIMBUS_SECRET_KEY: randomBytes(32).toString('base64'),
        NIMBUS_TRUST_PROXY: '127.0.0.1',
        NIMBUS_SIM_SPEEDUP: String(SPEEDUP),
        NIMBUS_PUBLIC_IP_POOLS: 'us-east-1=10.64.0.0/16',
      };
      const a = await startReplica('a');
      const b = await startReplica('b');
      ports.a = a.httpPort;
      ports.b = b.httpPort;
      const tls = path.join(dirs[0] as string, 'tls');
      ca = readFileSync(path.join(tls, 'cert.pem'));
      balancer = await startBalancer({
        binary: HAPROXY as string,
        certFile: path.join(tls, 'cert.pem'),
        keyFile: path.join(tls, 'key.pem'),
        backends: [
          { name: 'a', httpPort: ports.a },
          { name: 'b', httpPort: ports.b },
        ],
      });
      expect(a.rootKey).not.toBe('');
    }, 120_000);

    afterAll(async () => {
      await balancer?.close();
      for (const replica of replicas.values()) await replica.stop();
      await db?.end();
      await database?.drop();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    it('serves over the balancer: HTTPS outside, the replicas trusting its X-Forwarded-Proto', async () => {
      const health = await viaBalancer('GET', '/healthz');
      expect(health.status).toBe(200);
      expect(health.headers['strict-transport-security']).toBeDefined();
      // Straight to a replica's HTTP port, without the balancer's X-Forwarded-Proto, is plain HTTP: refused.
      const plain = await sendRequest(`http://127.0.0.1:${ports.a}`, null, 'GET', '/v1/account', {
        notApi: true,
      });
      expect(plain.status).toBe(400);
      expect(plain.body.error.message).toMatch(/HTTPS is required/);
    });

    it('shares the rate budget: 30 allowed in all, though the requests reach both replicas', async () => {
      const key = await newAccount(30, 30);
      const replies: Reply[] = [];
      for (let i = 0; i < 40; i++) replies.push(await viaBalancer('GET', '/v1/account', { key }));
      const statuses = replies.map((reply) => reply.status);
      expect(Object.keys(await whoAnswered(replies)).sort()).toEqual(['a', 'b']);
      expect(statuses.filter((s) => s === 200)).toHaveLength(30);
      expect(statuses.slice(30).every((s) => s === 429)).toBe(true);
    });

    it('shares idempotency: a replay answered by the other replica is the first answer', async () => {
      const key = await newAccount(100_000, 10_000);
      const body = { name: 'lb-replay', permissions: ['account:read'] };
      const headers = { 'idempotency-key': `lb-${randomBytes(6).toString('hex')}` };
      const first = await viaBalancer('POST', '/v1/account/api-keys', { key, body, headers });
      expect(first.status, first.text).toBe(201);
      const replies = [first];
      for (let i = 0; i < 3; i++) {
        const again = await viaBalancer('POST', '/v1/account/api-keys', { key, body, headers });
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body.data.id).toBe(first.body.data.id);
        replies.push(again);
      }
      expect(Object.keys(await whoAnswered(replies)).sort()).toEqual(['a', 'b']);
      const keys = await viaBalancer('GET', '/v1/account/api-keys?limit=100', { key });
      expect(keys.body.data.filter((k: { name: string }) => k.name === 'lb-replay')).toHaveLength(1);
    });

    it(
      `${CREATES} creates over both replicas all reach running; each boot step ran once; a replica killed mid-way and the rest still finish`,
      async () => {
        const key = await newAccount(1_000_000, 100_000);
        const created: string[] = [];
        const answers: Reply[] = [];
        const leaseOwners = new Set<string>();
        const create = async (i: number) => {
          const reply = await viaBalancer('POST', '/v1/instances', {
            key,
            body: { name: `lb-${i}`, ...COMPUTE },
            headers: { 'idempotency-key': `create-${i}` },
          });
          expect(reply.status, reply.text).toBe(202);
          created.push(reply.body.data.id);
          answers.push(reply);
        };
        const sampleLeases = async () => {
          const rows = await db.query('select distinct lease_owner from jobs where lease_owner is not null');
          for (const row of rows.rows) leaseOwners.add(row.lease_owner as string);
        };
        const countRunning = async () =>
          (await viaBalancer('GET', '/v1/instances?status=running&limit=1', { key })).body.pagination
            .total_items as number;

        // Phase 1: both replicas serve and run jobs. Half the creates, and all of them booted.
        for (let i = 0; i < CREATES / 2; i++) {
          await create(i);
          if (i % 5 === 0) await sampleLeases();
        }
        await waitFor(
          'the first half running',
          async () => {
            await sampleLeases();
            return (await countRunning()) === CREATES / 2 ? true : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        const answered = await whoAnswered(answers);
        expect(answered.a ?? 0, 'creates answered by a').toBeGreaterThan(CREATES / 8);
        expect(answered.b ?? 0, 'creates answered by b').toBeGreaterThan(CREATES / 8);
        expect(leaseOwners.size, 'runners seen holding boot jobs').toBe(2);
        const firstHalf = [...created];
        const counts = await callCounts();
        for (const id of firstHalf) expect(counts.get(id), id).toEqual({ provision: 1, start: 1 });

        // Phase 2: more creates; b is killed while the last of them boot.
        for (let i = CREATES / 2; i < CREATES * 0.75; i++) await create(i);
        const starting = (await viaBalancer('GET', '/v1/instances?status=starting&limit=1', { key })).body
          .pagination.total_items as number;
        expect(starting, 'instances booting when b is killed').toBeGreaterThan(0);
        await replicas.get('b')?.kill();
        for (let i = CREATES * 0.75; i < CREATES; i++) await create(i);
        expect(new Set(created).size).toBe(CREATES);

        await waitFor(
          'every instance running',
          async () => ((await countRunning()) === CREATES ? true : undefined),
          {
            timeoutMs: JOB_LEASE_MS + 60_000,
            intervalMs: 250,
          },
        );
        expect(await balancer.serverStates()).toMatchObject({ a: 'UP', b: 'DOWN' });
        const leftOver = await viaBalancer('GET', '/v1/instances?limit=1&status=starting', { key });
        expect(leftOver.body.pagination.total_items).toBe(0);
        const errors = await viaBalancer('GET', '/v1/instances?limit=1&status=error', { key });
        expect(errors.body.pagination.total_items).toBe(0);

        // One instance.started per instance, whoever ran its job (the guarded write makes a second one a no-op).
        const started = await db.query(
          "select resource_id, count(*)::int as n from events where type = 'instance.started' group by resource_id",
        );
        const startedBy = new Map(started.rows.map((row) => [row.resource_id as string, row.n as number]));
        for (const id of created) expect(startedBy.get(id), id).toBe(1);
        // A step b was running when it died may have run again on a (steps are idempotent); nothing else did.
        const after = await callCounts();
        const repeated = created.filter((id) => {
          const c = after.get(id) ?? {};
          return (c.provision ?? 0) > 1 || (c.start ?? 0) > 1;
        });
        expect(repeated.filter((id) => firstHalf.includes(id))).toEqual([]);
        expect(repeated.length).toBeLessThanOrEqual(starting);
        for (const id of created) {
          const c = after.get(id) ?? {};
          expect(c.provision ?? 0, id).toBeGreaterThanOrEqual(1);
          expect(c.start ?? 0, id).toBeGreaterThanOrEqual(1);
        }
      },
      JOB_LEASE_MS + 180_000,
    );

    it('a replica killed during its own start leaves nothing that keeps the next from starting', async () => {
      const dir = newDir();
      const child = spawn(process.execPath, [BIN, 'serve'], {
        cwd: ROOT,
        env: {
          ...baseEnv(os.tmpdir()),
          ...env,
          NIMBUS_DATA_DIR: dir,
          NIMBUS_HTTPS_PORT: String(await freePort()),
          NIMBUS_HTTP_PORT: String(await freePort()),
          NIMBUS_METRICS_PORT: String(await freePort()),
          NIMBUS_METADATA_PORT: String(await freePort()),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      // Killed as soon as it says anything: it is opening the database and running migrations.
      await waitFor('the starting replica to log', () => (output.length > 0 ? true : undefined), {
        timeoutMs: 20_000,
      });
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await gone;
      const next = await startReplica('c');
      expect((await next.request('GET', '/healthz')).status).toBe(200);
      const key = await newAccount(1000, 100);
      expect((await next.request('GET', '/v1/instances?limit=1', { key })).status).toBe(200);
      expect((await viaBalancer('GET', '/v1/instances?limit=1', { key })).status).toBe(200);
    });

    /** The simulator's call counts (sim_calls), machine id (= instance id) → call → count. */
    async function callCounts(): Promise<Map<string, Record<string, number>>> {
      const rows = await db.query('select machine_id, call, count from sim_calls');
      const counts = new Map<string, Record<string, number>>();
      for (const row of rows.rows) {
        const machine = counts.get(row.machine_id) ?? {};
        machine[row.call as string] = Number(row.count);
        counts.set(row.machine_id as string, machine);
      }
      return counts;
    }
  },
);
