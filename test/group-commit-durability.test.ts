/**
 * Group commit keeps its promise across a crash (issue 18, item 1), with the real server as a child
 * process (`bin/nimbus serve`) on SQLite with synchronous=FULL:
 *
 * - 64 concurrent creates; the process is killed with SIGKILL the moment the last 202 arrives; a new
 *   process on the same data dir has every answered instance, and boots each one to running.
 * - No answer before its commit: with the test-only NIMBUS_TEST_COMMIT_DELAY_MS the batch waits before
 *   its COMMIT; the process is killed while creates wait in it (the store's /metrics gauge shows them).
 *   No client got an answer, and after a restart none of those instances exists: nobody was told 202
 *   for a row that was lost.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/platform/config.js';
import { storeForSuite } from './helpers/backends.js';
import { restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { sendRequest } from './helpers/server.js';

const CONCURRENT_CREATES = 64;
/** Boot 400 ms: some instances are still starting when the process dies. */
const SPEEDUP = '20';
/** Long enough to see the waiting members on /metrics and kill the process before the COMMIT. */
const COMMIT_DELAY_MS = 1_500;

describe('NIMBUS_TEST_COMMIT_DELAY_MS', () => {
  it('is refused outside tests and read in them', () => {
    expect(() => loadConfig({ NIMBUS_TEST_COMMIT_DELAY_MS: '10', NODE_ENV: 'production' })).toThrow(
      ConfigError,
    );
    expect(() => loadConfig({ NIMBUS_TEST_COMMIT_DELAY_MS: '10' })).toThrow(/tests only/);
    expect(loadConfig({ NIMBUS_TEST_COMMIT_DELAY_MS: '10', NODE_ENV: 'test' }).testCommitDelayMs).toBe(10);
    expect(loadConfig({}).testCommitDelayMs).toBe(0);
  });
});

describe('Group commit across kill -9 (SQLite, child process)', () => {
  const suite = storeForSuite('sqlite', { dataDirPrefix: 'nimbus-group-commit-' });
  const server = restartableServer(suite, {
    env: { NODE_ENV: 'test', NIMBUS_SIM_SPEEDUP: SPEEDUP },
    startTimeoutMs: 60_000,
  });
  const { live, start, kill } = server;
  let key = '';

  /** Members of the open batch waiting for its COMMIT, from the store's gauge on /metrics. */
  async function waitingForCommit(): Promise<number> {
    const reply = await sendRequest(`http://127.0.0.1:${live().metricsPort}`, null, 'GET', '/metrics', {
      notApi: true,
    });
    const line = /^nimbus_sqlite_commit_waiting (\d+)$/m.exec(reply.text);
    if (!line) throw new Error(`no commit gauge on /metrics:\n${reply.text.slice(0, 500)}`);
    return Number(line[1]);
  }

  async function instanceNamed(name: string): Promise<Record<string, any> | undefined> {
    const reply = await live().request('GET', `/v1/instances?name=${name}&limit=100`, { key });
    expect(reply.status, reply.text).toBe(200);
    return (reply.body.data as Record<string, any>[]).find((i) => i.name === name);
  }

  beforeAll(async () => {
    await start();
    key = live().rootKey;
    expect(key, 'the first start writes the bootstrap key').not.toBe('');
  });

  it.sequential('every create answered 202 before kill -9 exists after a restart and reaches running', async () => {
    const replies = await Promise.all(
      Array.from({ length: CONCURRENT_CREATES }, (_, i) =>
        live().request('POST', '/v1/instances', { key, body: { name: `answered-${i}`, ...COMPUTE } }),
      ),
    );
    await kill();
    for (const reply of replies) expect(reply.status, reply.text).toBe(202);
    const ids = replies.map((reply) => reply.body.data.id as string);

    await start();
    let notRunning: string[] = [];
    await waitFor(
      `the ${ids.length} instances answered 202 to be running`,
      async () => {
        const reply = await live().request('GET', '/v1/instances?limit=100', { key });
        expect(reply.status, reply.text).toBe(200);
        const status = new Map<string, string>(
          (reply.body.data as { id: string; status: string }[]).map((i) => [i.id, i.status]),
        );
        const missing = ids.filter((id) => !status.has(id));
        expect(missing, 'instances answered 202 but missing after the restart').toEqual([]);
        notRunning = ids.filter((id) => status.get(id) !== 'running');
        return notRunning.length === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, lastSeen: () => `not running: ${notRunning.join(', ')}` },
    );
  }, 120_000);

  it.sequential('no create is answered before its commit: killed while the commit waits, none answered, none kept', async () => {
    await kill();
    await start({ NIMBUS_TEST_COMMIT_DELAY_MS: String(COMMIT_DELAY_MS) });
    const names = Array.from({ length: 8 }, (_, i) => `unanswered-${i}`);
    const outcomes = names.map((name) =>
      live()
        .request('POST', '/v1/instances', { key, body: { name, ...COMPUTE } })
        .then(
          (reply) => `HTTP ${reply.status}`,
          (error: Error) => `no answer (${error.message})`,
        ),
    );
    // A batch holds writes whose COMMIT has not run yet (the delay holds it back): kill now.
    await waitFor(
      'writes waiting for their COMMIT',
      async () => ((await waitingForCommit()) > 0 ? true : undefined),
      {
        timeoutMs: 20_000,
        intervalMs: 10,
      },
    );
    await kill();
    const seen = await Promise.all(outcomes);
    for (const outcome of seen) expect(outcome).toMatch(/^no answer/);

    await start();
    for (const name of names) {
      expect(await instanceNamed(name), `${name} was never answered, so it must not exist`).toBeUndefined();
    }
    // The instances of the first test are all still there.
    expect(await instanceNamed('answered-0')).toBeDefined();
  }, 120_000);
});
