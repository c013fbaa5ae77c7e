/**
 * The console offers an action exactly where the server's state table accepts it: for every status of
 * every stateful resource, the buttons of its actions (instance-actions.tsx, volumes.tsx, snapshots.tsx,
 * vpns.tsx) are compared with the table the server itself applies — taken from the server's modules, not
 * from the published copy the console reads, so a stale copy or a page that decides by hand fails here.
 */
import { fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { INSTANCE_STATES } from '../../../src/resources/instances/states.ts';
import { SNAPSHOT_SOURCE_STATUSES, SNAPSHOT_STATES } from '../../../src/resources/snapshots/states.ts';
import { VOLUME_STATES } from '../../../src/resources/volumes/states.ts';
import { VPN_STATES } from '../../../src/resources/vpns/states.ts';
import { FakeSocket, fakeFetch, type Route } from '../../test-fakes.ts';
import type { Instance, Schemas } from '../api.ts';
import { signIn } from '../session.ts';
import { InstanceActions } from './instance-actions.tsx';
import { SnapshotsPage } from './snapshots.tsx';
import { VolumesPage } from './volumes.tsx';
import { VpnSection } from './vpns.tsx';

/** The tables the server checks every request against. */
const SERVER_TABLES = {
  instance: INSTANCE_STATES,
  volume: VOLUME_STATES,
  snapshot: SNAPSHOT_STATES,
  vpn: VPN_STATES,
};
type StatefulKind = keyof typeof SERVER_TABLES;

/** The actions the server accepts from `status`, by the table it checks requests against. */
function serverAllows(kind: StatefulKind, status: string): string[] {
  const actions = SERVER_TABLES[kind].actions as Record<string, { from: readonly string[] }>;
  return Object.keys(actions)
    .filter((action) => actions[action]!.from.includes(status))
    .sort();
}

/** The actions behind the buttons shown, by each button's label; an unknown label fails the comparison. */
function offered(container: HTMLElement, labels: Record<string, string>): string[] {
  return within(container)
    .queryAllByRole('button')
    .map((button) => button.textContent?.trim() ?? '')
    .filter((label) => label !== 'Peers')
    .map((label) => labels[label] ?? `unknown button "${label}"`)
    .sort();
}

/** The table row that shows `name`. */
function rowOf(name: string): HTMLElement {
  const row = screen.getByText(name).closest('tr');
  if (!row) throw new Error(`no row shows ${name}`);
  return row;
}

const page = <T,>(data: T[]) => ({
  data,
  pagination: { page: 1, limit: 20, total: data.length, total_pages: 1 },
});

function signInWith(routes: Record<string, Route>): void {
  vi.stubGlobal('fetch', vi.fn(fakeFetch(routes).fetch));
  vi.stubGlobal('WebSocket', FakeSocket);
  signIn('nmb_state_actions_test_key');
}

afterEach(() => vi.unstubAllGlobals());

describe('instance actions', () => {
  const LABELS: Record<string, string> = {
    Start: 'start',
    Stop: 'stop',
    'Force stop': 'force_stop',
    Restart: 'restart',
    Resize: 'resize',
    Delete: 'delete',
  };
  // Edit (update) is the detail page's, next to the name; the bar has the others.
  const inBar = (actions: string[]) => actions.filter((action) => action !== 'update');
  const instance = {
    id: 'ins_1',
    name: 'web-1',
    region: 'us-east-1',
    instance_type: 'compute-2x',
  } as Instance;

  beforeEach(() => signInWith({}));

  it.each([...SERVER_TABLES.instance.statuses])('%s: the bar offers what the table accepts', (status) => {
    render(<InstanceActions instance={instance} status={status} onStatus={() => {}} onChanged={() => {}} />);
    const bar = screen.getByRole('group', { name: 'Actions for web-1' });
    expect(offered(bar, LABELS)).toEqual(inBar(serverAllows('instance', status)));
  });

  it('names only actions the table has', () => {
    expect(Object.keys(SERVER_TABLES.instance.actions)).toEqual(
      expect.arrayContaining(Object.values(LABELS)),
    );
  });
});

describe('volume actions', () => {
  const LABELS: Record<string, string> = {
    Edit: 'update',
    Attach: 'attach',
    Detach: 'detach',
    Resize: 'resize',
    Delete: 'delete',
    Snapshot: 'snapshot of it',
  };
  type Volume = Schemas['Volume'];
  const volume = (name: string, status: string, fields: Partial<Volume>): Volume =>
    ({
      id: `vol_${name}`,
      name,
      status,
      size_gb: 10,
      region: 'us-east-1',
      kind: 'data',
      instance_id: null,
      device_name: null,
      tags: {},
      protection: { delete: false },
      ...fields,
    }) as Volume;
  const statuses = [...SERVER_TABLES.volume.statuses];
  const onInstance = { instance_id: 'ins_1', device_name: '/dev/vdb' };

  beforeEach(() => {
    const volumes = statuses.flatMap((status) => [
      volume(`detached-${status}`, status, {}),
      volume(`attached-${status}`, status, onInstance),
      volume(`root-${status}`, status, { ...onInstance, kind: 'root', device_name: '/dev/vda' }),
    ]);
    signInWith({
      '/v1/volumes': () => page(volumes),
      '/v1/instances': () => page([{ id: 'ins_1', name: 'web-1', region: 'us-east-1', status: 'running' }]),
    });
  });

  /** The table's actions a volume row can offer (restore is the Snapshots page's), with taking a snapshot. */
  function expected(status: string): string[] {
    const actions = serverAllows('volume', status).filter((action) => action !== 'restore');
    const snapshot = (SNAPSHOT_SOURCE_STATUSES.volume as readonly string[]).includes(status);
    return [...actions, ...(snapshot ? ['snapshot of it'] : [])].sort();
  }

  it('offers a data volume, attached or not, no action its status refuses, and each it accepts on one of the two', async () => {
    render(<VolumesPage />);
    await screen.findByText('detached-available');
    for (const status of statuses) {
      const detached = offered(rowOf(`detached-${status}`), LABELS);
      const attached = offered(rowOf(`attached-${status}`), LABELS);
      // Beyond the status, the server refuses attach and delete on an instance, detach on none.
      expect(detached, `detached-${status}`).toEqual(expected(status).filter((a) => a !== 'detach'));
      expect(attached, `attached-${status}`).toEqual(
        expected(status).filter((a) => a !== 'attach' && a !== 'delete'),
      );
    }
  });

  it('offers a root volume only its edit: it follows its instance', async () => {
    render(<VolumesPage />);
    await screen.findByText('root-available');
    for (const status of statuses) {
      expect(offered(rowOf(`root-${status}`), LABELS), `root-${status}`).toEqual(
        serverAllows('volume', status).filter((a) => a === 'update'),
      );
    }
  });
});

describe('snapshot actions', () => {
  const LABELS: Record<string, string> = { Edit: 'update', Restore: 'restore', Delete: 'delete' };
  const statuses = [...SERVER_TABLES.snapshot.statuses];

  beforeEach(() => {
    const snapshots = statuses.map((status) => ({
      id: `snap_${status}`,
      name: `snapshot-${status}`,
      status,
      source_volume_id: 'vol_1',
      source_instance_id: null,
      size_gb: 10,
      region: 'us-east-1',
      kind: 'manual',
      tags: {},
      error: null,
      created_at: '2026-04-06T12:00:00.000Z',
    }));
    signInWith({ '/v1/snapshots': () => page(snapshots), '/v1/volumes': () => page([]) });
  });

  it('offers on every snapshot what the table accepts from its status', async () => {
    render(<SnapshotsPage />);
    await screen.findByText('snapshot-available');
    for (const status of statuses) {
      expect(offered(rowOf(`snapshot-${status}`), LABELS), status).toEqual(serverAllows('snapshot', status));
    }
  });
});

describe('VPN actions', () => {
  const LABELS: Record<string, string> = { Edit: 'update', Delete: 'delete' };
  const statuses = [...SERVER_TABLES.vpn.statuses];

  beforeEach(() => {
    const vpns = statuses.map((status) => ({
      id: `vpn_${status}`,
      name: `vpn-${status}`,
      status,
      region: 'us-east-1',
      endpoint: '203.0.113.1:51820',
      tunnel_cidr: '10.99.0.0/24',
      routes: ['10.0.0.0/16'],
      allowed_cidrs: [],
    }));
    const routes: Record<string, Route> = { '/v1/vpn': () => page(vpns) };
    for (const vpn of vpns) {
      routes[`/v1/vpn/${vpn.id}/peers`] = () =>
        page([
          {
            id: `peer_${vpn.status}`,
            vpn_id: vpn.id,
            name: `laptop-${vpn.status}`,
            address: '10.99.0.2',
            // The gateway's figures, as the list always has them.
            last_handshake_at: null,
            received_bytes: 0,
            sent_bytes: 0,
          },
        ]);
    }
    signInWith(routes);
  });

  it('offers on every VPN, and on its peers, what the table accepts from its status', async () => {
    render(<VpnSection />);
    await screen.findByText('vpn-active');
    for (const status of statuses) {
      const accepted = serverAllows('vpn', status);
      expect(offered(rowOf(`vpn-${status}`), LABELS), status).toEqual(
        accepted.filter((a) => a === 'update' || a === 'delete'),
      );
      fireEvent.click(screen.getByRole('button', { name: `Peers of vpn-${status}` }));
      await screen.findByText(`laptop-${status}`);
      const removable = screen.queryByRole('button', { name: `Remove peer laptop-${status}` }) !== null;
      const addable = screen.queryByRole('form', { name: `Add a peer to vpn-${status}` }) !== null;
      expect({ remove_peer: removable, add_peer: addable }, status).toEqual({
        remove_peer: accepted.includes('remove_peer'),
        add_peer: accepted.includes('add_peer'),
      });
    }
    await waitFor(() => expect(screen.queryAllByText(/^laptop-/)).toHaveLength(1));
  });
});
