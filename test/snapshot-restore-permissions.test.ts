/**
 * Who may restore a snapshot into what, over HTTPS on both stores (issue 29 item 5). A restore creates or
 * writes a volume or an instance, so besides `snapshots:write` the key needs what `POST /v1/volumes` or
 * `POST /v1/instances` would need: `volumes:write` for a new volume or one written over, `instances:write`
 * for a new instance or a stopped instance's root disk — also when no body names the target and the
 * snapshot decides it. Each form is tried with every key that falls short (403 forbidden naming the
 * permission, nothing made) and then with exactly enough (202).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { createStopped, listTotal } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { availableSnapshot, restore } from './helpers/snapshots.js';
import { createAvailable } from './helpers/volumes.js';

type Json = Record<string, any>;
type Area = 'volumes' | 'instances';

interface Fixtures {
  volumeSnapshot: Json;
  /** A snapshot of the root disk of `stoppedSource`, which is stopped. */
  rootSnapshot: Json;
  stoppedSource: Json;
  /** Another stopped instance, written over by `instance_id`. */
  stoppedTarget: Json;
  detachedVolume: Json;
}

interface RestoreForm {
  form: string;
  needs: Area;
  snapshot: (f: Fixtures) => Json;
  /** undefined: no body at all (no Content-Type either). */
  body: (f: Fixtures) => unknown;
}

const FORMS: RestoreForm[] = [
  {
    form: 'a new volume (name)',
    needs: 'volumes',
    snapshot: (f) => f.volumeSnapshot,
    body: () => ({ name: 'restored' }),
  },
  {
    form: 'over a detached volume (target_volume_id)',
    needs: 'volumes',
    snapshot: (f) => f.volumeSnapshot,
    body: (f) => ({ target_volume_id: f.detachedVolume.id }),
  },
  {
    form: "over a stopped instance's root disk (instance_id)",
    needs: 'instances',
    snapshot: (f) => f.rootSnapshot,
    body: (f) => ({ instance_id: f.stoppedTarget.id }),
  },
  {
    form: 'a new instance (instance)',
    needs: 'instances',
    snapshot: (f) => f.rootSnapshot,
    body: () => ({ instance: { name: 'from-snapshot', instance_type: 'compute-1x' } }),
  },
  {
    form: "no body, a data volume's snapshot (a new volume)",
    needs: 'volumes',
    snapshot: (f) => f.volumeSnapshot,
    body: () => undefined,
  },
  {
    form: 'no body, a root snapshot (its stopped source instance)',
    needs: 'instances',
    snapshot: (f) => f.rootSnapshot,
    body: () => undefined,
  },
];

const other = (area: Area): Area => (area === 'volumes' ? 'instances' : 'volumes');

describe.each(STORES)('Snapshot restore permissions (%s)', (store) => {
  const server = serverForSuite({ store });
  let owner = '';
  let fixtures: Fixtures;

  async function keyWith(permissions: string[]): Promise<string> {
    const reply = await server.request('POST', '/v1/account/api-keys', {
      key: owner,
      body: { name: `restore-${permissions.join('+')}`, permissions },
    });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data.key;
  }

  async function volumeTotal(): Promise<number> {
    const reply = await server.request('GET', '/v1/volumes', { key: owner });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.pagination.total_items;
  }

  beforeAll(async () => {
    owner = (await account(server)).key;
    const source = await createAvailable(server, owner, { size_gb: 10 });
    const stoppedSource = await createStopped(server, owner);
    fixtures = {
      volumeSnapshot: await availableSnapshot(server, owner, { volume_id: source.id }),
      rootSnapshot: await availableSnapshot(server, owner, { instance_id: stoppedSource.id }),
      stoppedSource,
      stoppedTarget: await createStopped(server, owner),
      detachedVolume: await createAvailable(server, owner, { size_gb: 10 }),
    };
  });

  it.each(FORMS.map((f) => [f.form, f] as const))('%s', async (_, form) => {
    const snapshot = form.snapshot(fixtures);
    const body = form.body(fixtures);
    const needed = `${form.needs}:write`;
    const before = { volumes: await volumeTotal(), instances: await listTotal(server, owner) };

    const shortOfTarget = [
      ['snapshots:write'],
      ['snapshots:write', `${form.needs}:read`],
      ['snapshots:write', `${other(form.needs)}:write`],
    ];
    for (const permissions of shortOfTarget) {
      const refused = await restore(server, await keyWith(permissions), snapshot.id, body);
      const error = expectError(refused, 403, 'forbidden');
      expect(error.message, permissions.join(',')).toContain(needed);
      expect(error.details).toEqual({ required_permission: needed });
    }
    // The target's permission does not stand in for the snapshot's.
    const withoutSnapshots = await restore(server, await keyWith([needed]), snapshot.id, body);
    expect(expectError(withoutSnapshots, 403, 'forbidden').details).toEqual({
      required_permission: 'snapshots:write',
    });
    // Nothing was made or written by the refusals.
    expect(await volumeTotal()).toBe(before.volumes);
    expect(await listTotal(server, owner)).toBe(before.instances);

    const allowed = await restore(server, await keyWith(['snapshots:write', needed]), snapshot.id, body);
    expect(allowed.status, allowed.text).toBe(202);
  });
  it('replays a restore only to a key that could have made it (Idempotency-Key)', async () => {
    const path = `/v1/snapshots/${fixtures.volumeSnapshot.id}/restore`;
    const headers = { 'idempotency-key': `restore-replay-${store}` };
    const body = { name: 'replayed' };
    const made = await server.request('POST', path, { key: owner, body, headers });
    expect(made.status, made.text).toBe(202);

    const short = await keyWith(['snapshots:write']);
    const refused = await server.request('POST', path, { key: short, body, headers });
    expect(expectError(refused, 403, 'forbidden').details).toEqual({ required_permission: 'volumes:write' });
    expect(refused.headers['idempotent-replayed']).toBeUndefined();

    const replayed = await server.request('POST', path, { key: owner, body, headers });
    expect(replayed.status, replayed.text).toBe(202);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body.data.volume.id).toBe(made.body.data.volume.id);
  });
});
