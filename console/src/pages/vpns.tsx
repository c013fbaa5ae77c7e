/**
 * Networking → VPNs: WireGuard gateways (GET /v1/vpn), create, edit (name and extra routes, a dialog
 * opened from the row), delete after a confirmation, and per VPN
 * its peers: add (own public key, or one the server generates and shows once), remove, each one's last
 * handshake and bytes as the gateway counts them, and the client's wg-quick file downloaded as
 * `<peer>.conf` (fetched with the key, saved through a Blob URL).
 */
import { useState } from 'preact/hooks';
import { allows, isTransitional, type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { type Column, Table } from '../components/table.tsx';
import { formatBytes, formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { usePollWhile } from '../poll.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import { cidrList, vpnDraftOf, vpnPatch } from './vpn-edit.ts';

type Vpn = Schemas['Vpn'];
type Peer = Schemas['VpnPeer'];
type Region = (typeof REGIONS)[number];

/** Saves text as a file the browser downloads (no server round trip: the text is already here). */
function saveFile(fileName: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function VpnSection() {
  const api = currentSession().api;
  const vpns = useLoad(
    async () => (await unwrap(api.GET('/v1/vpn', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  usePollWhile(
    (vpns.data ?? []).some((v) => isTransitional('vpn', v.status)),
    vpns.reload,
  );
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<Vpn | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();

  const remove = (vpn: Vpn) =>
    ask(`Delete the VPN ${vpn.name}?`, 'Its clients are cut off and its peers are removed.', 'Delete', () =>
      attempt(async () => {
        await unwrap(api.DELETE('/v1/vpn/{id}', { params: { path: { id: vpn.id } } }));
        vpns.reload();
      }),
    );

  const columns: Column<Vpn>[] = [
    { label: 'Name', render: (v) => v.name },
    { label: 'Status', render: (v) => <StatusBadge status={v.status} /> },
    { label: 'Region', render: (v) => v.region },
    { label: 'Endpoint', render: (v) => <code>{v.endpoint}</code> },
    { label: 'Tunnel', render: (v) => <code>{v.tunnel_cidr}</code> },
    { label: 'Routes', render: (v) => v.routes.join(', ') },
    {
      label: 'Actions',
      render: (v) => (
        <div class="row-actions">
          <button
            type="button"
            aria-expanded={open === v.id}
            aria-label={`Peers of ${v.name}`}
            onClick={() => setOpen(open === v.id ? null : v.id)}
          >
            Peers
          </button>
          {allows('vpn', 'update', v.status) && (
            <button type="button" aria-label={`Edit VPN ${v.name}`} onClick={() => setEditing(v)}>
              Edit
            </button>
          )}
          {allows('vpn', 'delete', v.status) && (
            <button
              type="button"
              class="danger"
              aria-label={`Delete VPN ${v.name}`}
              onClick={() => remove(v)}
            >
              Delete
            </button>
          )}
        </div>
      ),
    },
  ];
  const opened = vpns.data?.find((v) => v.id === open);

  return (
    <section class="panel-gap" aria-labelledby="vpn-heading">
      <div class="page-head">
        <h2 id="vpn-heading">VPNs</h2>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create VPN
        </button>
      </div>
      {creating && (
        <CreateVpnForm
          onCancel={() => setCreating(false)}
          onCreated={() => {
            setCreating(false);
            vpns.reload();
          }}
        />
      )}
      {editing && (
        <EditVpnDialog
          vpn={editing}
          onCancel={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            vpns.reload();
          }}
        />
      )}
      <ErrorNotice error={error ?? vpns.error} />
      {vpns.data && vpns.data.length === 0 ? (
        <EmptyState title="No VPNs">
          <p>
            Create a VPN to reach a region's private network from your laptop, then add a peer per device.
          </p>
        </EmptyState>
      ) : (
        <Table caption="VPNs" columns={columns} rows={vpns.data ?? []} rowKey={(v) => v.id} />
      )}
      {opened && <Peers key={opened.id} vpn={opened} />}
      {dialog}
    </section>
  );
}

function CreateVpnForm(props: { onCancel: () => void; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [region, setRegion] = useState<Region>('us-east-1');
  const [allowed, setAllowed] = useState('');
  const submit = async () => {
    const cidrs = cidrList(allowed);
    await unwrap(
      currentSession().api.POST('/v1/vpn', {
        body: { name, region, ...(cidrs.length ? { allowed_cidrs: cidrs } : {}) },
      }),
    );
    props.onCreated();
  };
  return (
    <FormDialog title="Create VPN" submitLabel="Create" onSubmit={submit} onCancel={props.onCancel}>
      <div class="field-row">
        <TextField label="Name" required value={name} onValue={setName} />
        <SelectField label="Region" value={region} options={REGIONS} onValue={setRegion} />
      </div>
      <TextField
        label="Extra routes (optional CIDR blocks)"
        placeholder="0.0.0.0/0 for a full tunnel"
        hint="The region's private network is always routed."
        value={allowed}
        onValue={setAllowed}
      />
    </FormDialog>
  );
}

/**
 * Rename a VPN or change its extra routes: a modal opened from its row, sending only what changed. New
 * routes reach a client through its configuration file, so the dialog says to download it again.
 */
function EditVpnDialog(props: { vpn: Vpn; onCancel: () => void; onSaved: () => void }) {
  const [initial] = useState(() => vpnDraftOf(props.vpn));
  const [draft, setDraft] = useState(initial);
  const submit = async () => {
    const body = vpnPatch(initial, draft);
    // Nothing changed: the API refuses an empty PATCH, and there is nothing to save.
    if (Object.keys(body).length > 0)
      await unwrap(
        currentSession().api.PATCH('/v1/vpn/{id}', { params: { path: { id: props.vpn.id } }, body }),
      );
    props.onSaved();
  };
  return (
    <FormDialog
      modal
      title={`Edit VPN ${props.vpn.name}`}
      submitLabel="Save"
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField label="Name" required value={draft.name} onValue={(name) => setDraft({ ...draft, name })} />
      <TextField
        label="Extra routes (CIDR blocks)"
        placeholder="0.0.0.0/0 for a full tunnel"
        hint="Empty leaves only the region's private network. Clients get new routes from a configuration downloaded again."
        value={draft.allowed}
        onValue={(allowed) => setDraft({ ...draft, allowed })}
      />
      <p class="muted">In {props.vpn.region}: a VPN cannot move to another region.</p>
    </FormDialog>
  );
}

function Peers({ vpn }: { vpn: Vpn }) {
  const api = currentSession().api;
  const peers = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/vpn/{id}/peers', { params: { path: { id: vpn.id }, query: { limit: 100 } } }),
        )
      ).data,
    [vpn.id],
  );
  const [name, setName] = useState('');
  const [publicKey, setPublicKey] = useState('');
  const [fresh, setFresh] = useState<{ name: string; config: string; privateKey: boolean } | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();

  const add = (event: Event) => {
    event.preventDefault();
    void attempt(async () => {
      const answer = await unwrap(
        api.POST('/v1/vpn/{id}/peers', {
          params: { path: { id: vpn.id } },
          body: { name, ...(publicKey.trim() ? { public_key: publicKey.trim() } : {}) },
        }),
      );
      const peer = answer.data as Peer & { config?: string; private_key?: string };
      setFresh({ name: peer.name, config: peer.config ?? '', privateKey: Boolean(peer.private_key) });
      setName('');
      setPublicKey('');
      peers.reload();
    });
  };
  const download = (peer: Peer) =>
    attempt(async () => {
      const answer = await unwrap(
        api.GET('/v1/vpn/{id}/peers/{peer_id}/config', {
          params: { path: { id: vpn.id, peer_id: peer.id } },
        }),
      );
      saveFile(`${peer.name}.conf`, answer.data.config);
    });
  const remove = (peer: Peer) =>
    ask(`Remove the peer ${peer.name}?`, 'That device can no longer connect.', 'Remove', () =>
      attempt(async () => {
        await unwrap(
          api.DELETE('/v1/vpn/{id}/peers/{peer_id}', { params: { path: { id: vpn.id, peer_id: peer.id } } }),
        );
        peers.reload();
      }),
    );

  return (
    <section class="card" aria-labelledby="peers-heading">
      <h3 id="peers-heading">Peers of {vpn.name}</h3>
      {fresh && (
        <div class="notice notice-secret" role="status">
          <p>
            <strong>
              {fresh.privateKey
                ? `Download the configuration of ${fresh.name} now: it holds a private key that will not be shown again.`
                : `Peer ${fresh.name} added: put your private key in its configuration.`}
            </strong>
          </p>
          <div class="actions">
            <button type="button" onClick={() => saveFile(`${fresh.name}.conf`, fresh.config)}>
              Download {fresh.name}.conf
            </button>
            <button type="button" onClick={() => setFresh(null)}>
              Done
            </button>
          </div>
        </div>
      )}
      <ErrorNotice error={error ?? peers.error} />
      {peers.data && peers.data.length === 0 ? (
        <EmptyState title="No peers">
          <p>
            Add a peer for each device that connects: paste its WireGuard public key, or let Nimbus make one.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption={`Peers of ${vpn.name}`}
          rows={peers.data ?? []}
          rowKey={(p) => p.id}
          columns={[
            { label: 'Name', render: (p) => p.name },
            { label: 'Address', render: (p) => <code>{p.address}</code> },
            { label: 'Public key', render: (p) => <code>{p.public_key}</code> },
            // The gateway's own figures: the real gateway's on OVN, the simulator's otherwise.
            {
              label: 'Last handshake',
              render: (p) => (p.last_handshake_at ? formatDate(p.last_handshake_at) : 'never'),
            },
            {
              label: 'Received / sent',
              render: (p) => `${formatBytes(p.received_bytes)} / ${formatBytes(p.sent_bytes)}`,
            },
            {
              label: 'Actions',
              render: (p) => (
                <div class="row-actions">
                  <button
                    type="button"
                    aria-label={`Download config of ${p.name}`}
                    onClick={() => download(p)}
                  >
                    Download config
                  </button>
                  {allows('vpn', 'remove_peer', vpn.status) && (
                    <button
                      type="button"
                      class="danger"
                      aria-label={`Remove peer ${p.name}`}
                      onClick={() => remove(p)}
                    >
                      Remove
                    </button>
                  )}
                </div>
              ),
            },
          ]}
        />
      )}
      {allows('vpn', 'add_peer', vpn.status) && (
        <form class="stack" onSubmit={add} aria-label={`Add a peer to ${vpn.name}`}>
          <div class="field-row">
            <TextField label="Peer name" required value={name} onValue={setName} />
            <TextField
              label="Public key (optional)"
              placeholder="wg genkey | wg pubkey"
              hint="Empty: Nimbus generates a key pair and shows its configuration once."
              value={publicKey}
              onValue={setPublicKey}
            />
          </div>
          <div class="actions">
            <button type="submit" class="primary">
              Add peer
            </button>
          </div>
        </form>
      )}
      {dialog}
    </section>
  );
}
