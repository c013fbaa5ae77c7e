/**
 * Public IPs: the list (GET /v1/public-ips), allocate in a region, and per address assign to an instance
 * chosen from the account's instances in its region that have none, unassign, rename or retag, and
 * release after a confirmation. Public IPs have no state table: what a row offers follows from where the
 * address is (the server refuses release while assigned, and assigning an instance that has one).
 */
import { useState } from 'preact/hooks';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { InstancePickerDialog, useInstanceChoices } from '../components/instance-picker.tsx';
import { type Column, Pager, Table } from '../components/table.tsx';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { formatTags } from '../tags.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import { NameTagsDialog } from './name-tags-edit.tsx';
import './storage-network.css';

type PublicIp = Schemas['PublicIp'];
type Instance = Schemas['Instance'];
type Region = (typeof REGIONS)[number];
const PAGE_SIZE = 20;

/** What a row offers: assign when unassigned, unassign and no release while assigned. */
export function publicIpActions(ip: Pick<PublicIp, 'instance_id'>): ('assign' | 'unassign' | 'release')[] {
  return ip.instance_id === null ? ['assign', 'release'] : ['unassign'];
}

/** The instances an address can go to: same region, not being deleted, and holding no public IP. */
export function assignableInstances(ip: Pick<PublicIp, 'region'>, instances: Instance[]): Instance[] {
  return instances.filter((i) => i.region === ip.region && i.status !== 'deleting' && i.public_ip === null);
}

type Panel = { kind: 'allocate' } | { kind: 'edit'; ip: PublicIp } | { kind: 'assign'; ip: PublicIp };

export function PublicIpsPage() {
  const api = currentSession().api;
  const [page, setPage] = useState(1);
  const list = useLoad(
    () => unwrap(api.GET('/v1/public-ips', { params: { query: { page, limit: PAGE_SIZE } } })),
    [page],
  );
  const instances = useInstanceChoices();
  const ips = list.data?.data ?? [];
  const [panel, setPanel] = useState<Panel | null>(null);
  const { error, attempt } = useAttempt();
  const [notice, setNotice] = useState<string | null>(null);
  const { ask, dialog } = useConfirm();
  const instanceName = (id: string) => instances.data?.find((i) => i.id === id)?.name ?? id;

  const act = (work: () => Promise<unknown>, done?: string) => {
    setNotice(null);
    return attempt(async () => {
      await work();
      if (done) setNotice(done);
      list.reload();
      instances.reload();
    });
  };
  const unassign = (ip: PublicIp) =>
    ask(
      `Unassign ${ip.address}?`,
      `${instanceName(ip.instance_id ?? '')} loses this address at once; you keep it (billed while unassigned).`,
      'Unassign',
      () => act(() => unwrap(api.POST('/v1/public-ips/{id}/unassign', { params: { path: { id: ip.id } } }))),
    );
  const release = (ip: PublicIp) =>
    ask(
      `Release ${ip.address}?`,
      'The address leaves your account for good; it is not handed out again for 24 hours.',
      'Release',
      () =>
        act(
          () => unwrap(api.DELETE('/v1/public-ips/{id}', { params: { path: { id: ip.id } } })),
          `Released ${ip.address}.`,
        ),
    );

  const columns: Column<PublicIp>[] = [
    { label: 'Name', render: (ip) => ip.name },
    { label: 'Address', render: (ip) => <code>{ip.address}</code> },
    { label: 'Region', render: (ip) => ip.region },
    {
      label: 'Assigned to',
      render: (ip) =>
        ip.instance_id ? (
          <a href={`/console/instances/${ip.instance_id}`}>{instanceName(ip.instance_id)}</a>
        ) : (
          <span class="muted">Unassigned (billed)</span>
        ),
    },
    { label: 'With instance', render: (ip) => (ip.auto_delete ? 'Released with it' : 'Kept') },
    { label: 'Tags', render: (ip) => formatTags(ip.tags) || '—' },
    { label: 'Protected', render: (ip) => (ip.protection.delete ? 'Yes' : 'No') },
    {
      label: 'Actions',
      render: (ip) => {
        const offered = publicIpActions(ip);
        return (
          <div class="row-actions">
            <button
              type="button"
              aria-label={`Edit ${ip.name}`}
              onClick={() => setPanel({ kind: 'edit', ip })}
            >
              Edit
            </button>
            {offered.includes('assign') && (
              <button
                type="button"
                aria-label={`Assign ${ip.name}`}
                onClick={() => setPanel({ kind: 'assign', ip })}
              >
                Assign
              </button>
            )}
            {offered.includes('unassign') && (
              <button type="button" aria-label={`Unassign ${ip.name}`} onClick={() => unassign(ip)}>
                Unassign
              </button>
            )}
            {offered.includes('release') && (
              <button
                type="button"
                class="danger"
                aria-label={`Release ${ip.name}`}
                onClick={() => release(ip)}
              >
                Release
              </button>
            )}
          </div>
        );
      },
    },
  ];

  const closePanel = () => setPanel(null);
  return (
    <section>
      <div class="page-head">
        <h1>Public IPs</h1>
        <button type="button" class="primary" onClick={() => setPanel({ kind: 'allocate' })}>
          Allocate public IP
        </button>
      </div>
      {panel?.kind === 'allocate' && (
        <AllocateForm
          onCancel={closePanel}
          onAllocated={(ip) => {
            closePanel();
            setNotice(`Allocated ${ip.address} in ${ip.region}.`);
            list.reload();
          }}
        />
      )}
      {panel?.kind === 'edit' && (
        <NameTagsDialog
          title={`Edit public IP ${panel.ip.name}`}
          resource={panel.ip}
          save={(body) =>
            unwrap(api.PATCH('/v1/public-ips/{id}', { params: { path: { id: panel.ip.id } }, body }))
          }
          onCancel={closePanel}
          onSaved={() => {
            closePanel();
            list.reload();
          }}
        />
      )}
      {panel?.kind === 'assign' && (
        <InstancePickerDialog
          title={`Assign ${panel.ip.address}`}
          submitLabel="Assign"
          region={panel.ip.region}
          noneMessage={`No instance in ${panel.ip.region} is without a public IP: unassign one first, or create one with no public IP.`}
          instances={assignableInstances(panel.ip, instances.data ?? [])}
          onCancel={closePanel}
          onSubmit={(instanceId) => {
            closePanel();
            void act(
              () =>
                unwrap(
                  api.POST('/v1/public-ips/{id}/assign', {
                    params: { path: { id: panel.ip.id } },
                    body: { instance_id: instanceId },
                  }),
                ),
              `${panel.ip.address} is now ${instanceName(instanceId)}'s address.`,
            );
          }}
        />
      )}
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ErrorNotice error={error ?? list.error} />
      {list.data && ips.length === 0 ? (
        <EmptyState title="No public IPs yet">
          <p>
            Allocate an address to keep it across instances: assign it to one, move it to a replacement, and
            release it when you are done.
          </p>
          <button type="button" class="primary" onClick={() => setPanel({ kind: 'allocate' })}>
            Allocate public IP
          </button>
        </EmptyState>
      ) : (
        <Table caption="Public IPs" columns={columns} rows={ips} rowKey={(ip) => ip.id} />
      )}
      {list.data && <Pager page={page} totalPages={list.data.pagination.total_pages} onPage={setPage} />}
      {dialog}
    </section>
  );
}

function AllocateForm(props: { onCancel: () => void; onAllocated: (ip: PublicIp) => void }) {
  const [name, setName] = useState('');
  const [region, setRegion] = useState<Region>('us-east-1');
  const submit = async () => {
    const answer = await unwrap(
      currentSession().api.POST('/v1/public-ips', { body: { region, ...(name ? { name } : {}) } }),
    );
    props.onAllocated(answer.data);
  };
  return (
    <FormDialog title="Allocate public IP" submitLabel="Allocate" onSubmit={submit} onCancel={props.onCancel}>
      <div class="field-row">
        <TextField label="Name (optional)" value={name} onValue={setName} />
        <SelectField label="Region" value={region} options={REGIONS} onValue={setRegion} />
      </div>
      <p class="muted">An address held but not assigned to an instance costs 0.005 USD per hour.</p>
    </FormDialog>
  );
}
