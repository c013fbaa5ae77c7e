/**
 * Issue 30 item 4: the state tables are published in the served OpenAPI document (`x-nimbus-states`),
 * equal to the tables the server checks every action against, and the SDK's generated copy (what the
 * console and the CLI read) is the document's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATE_TABLES as SDK_TABLES } from '../sdk/src/generated/states.js';
import { type StateTable, statusAfter } from '../src/platform/lifecycle/state-table.js';
import { INSTANCE_STATES } from '../src/resources/instances/states.js';
import { SNAPSHOT_SOURCE_STATUSES, SNAPSHOT_STATES } from '../src/resources/snapshots/states.js';
import { VOLUME_STATES } from '../src/resources/volumes/states.js';
import { VPN_STATES } from '../src/resources/vpns/states.js';
import { startTestServer, type TestServer } from './helpers/server.js';

interface Published {
  statuses: string[];
  transitional: string[];
  create: { status: string; target?: string; sources?: Record<string, string[]> };
  actions: Record<
    string,
    { from: string[]; to?: string | Record<string, string>; target?: string; description?: string }
  >;
}

// Each table with its own status and action unions; compared here as strings.
const SERVER_TABLES: Record<string, StateTable<any, any>> = {
  instance: INSTANCE_STATES,
  volume: VOLUME_STATES,
  snapshot: SNAPSHOT_STATES,
  vpn: VPN_STATES,
};

describe('the state tables in the OpenAPI document', () => {
  let server: TestServer;
  let published: Record<string, Published>;

  beforeAll(async () => {
    server = await startTestServer();
    const reply = await server.request('GET', '/v1/openapi.json');
    expect(reply.status).toBe(200);
    published = reply.body['x-nimbus-states'];
  });
  afterAll(async () => {
    await server?.close();
  });

  it('publishes one table per stateful resource', () => {
    expect(Object.keys(published).sort()).toEqual(Object.keys(SERVER_TABLES).sort());
  });

  it.each(Object.keys(SERVER_TABLES))('publishes the %s table the server applies', (kind) => {
    const table = SERVER_TABLES[kind]!;
    const copy = published[kind]!;
    expect(copy.statuses).toEqual(table.statuses);
    expect(copy.create).toEqual(table.create);
    expect(Object.keys(copy.actions)).toEqual(Object.keys(table.actions));
    for (const [action, transition] of Object.entries(table.actions)) {
      const entry = copy.actions[action]!;
      expect(entry.from, `${kind} ${action}`).toEqual(transition.from);
      expect(entry.target, `${kind} ${action}`).toEqual(transition.target);
      expect(entry.description, `${kind} ${action}`).toEqual(transition.description);
      for (const from of transition.from) {
        const to = typeof entry.to === 'object' ? entry.to[from] : (entry.to ?? from);
        expect(to, `${kind} ${action} from ${from}`).toBe(statusAfter(table, action, from));
      }
    }
  });

  it('names the statuses a resource only passes through, which clients poll', () => {
    expect(Object.fromEntries(Object.entries(published).map(([kind, t]) => [kind, t.transitional]))).toEqual({
      instance: ['starting', 'stopping', 'deleting'],
      volume: ['creating', 'attaching', 'detaching', 'resizing', 'deleting', 'restoring'],
      snapshot: ['creating', 'deleting'],
      vpn: ['provisioning', 'deleting'],
    });
  });

  it('says which statuses a snapshot may be taken of', () => {
    expect(published.snapshot!.create.sources).toEqual(SNAPSHOT_SOURCE_STATUSES);
  });

  it("is what the SDK's generated tables hold", () => {
    expect(SDK_TABLES).toEqual(published);
  });
});
