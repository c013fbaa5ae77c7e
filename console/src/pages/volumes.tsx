/**
 * Volumes: the list (GET /v1/volumes), create (with an optional instance to attach to), and per volume
 * edit its name and tags (PATCH /v1/volumes/{id}; its backup schedule is set on the Snapshots page),
 * attach, detach, resize (grow only), snapshot and delete after a confirmation. Statuses stay current by
 * polling the list only while a volume is changing (no stream carries volumes).
 */
import { useState } from 'preact/hooks';
import { allows, isTransitional, type Schemas, snapshotSourceAllows, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { InstancePickerDialog, useInstanceChoices } from '../components/instance-picker.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { type Column, Pager, Table } from '../components/table.tsx';
import { useLoad } from '../load.ts';
import { usePollWhile } from '../poll.ts';
import { currentSession } from '../session.ts';
import { formatTags } from '../tags.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import { NameTagsDialog } from './name-tags-edit.tsx';
import './storage-network.css';

type Volume = Schemas['Volume'];
type Region = (typeof REGIONS)[number];
const PAGE_SIZE = 20;

type Panel =
  | { kind: 'create' }
  | { kind: 'edit'; volume: Volume }
  | { kind: 'attach'; volume: Volume }
  | { kind: 'resize'; volume: Volume }
  | { kind: 'snapshot'; volume: Volume };

export function VolumesPage() {
  const api = currentSession().api;
  const [page, setPage] = useState(1);
  const list = useLoad(
    () => unwrap(api.GET('/v1/volumes', { params: { query: { page, limit: PAGE_SIZE } } })),
    [page],
  );
  const instances = useInstanceChoices();
  const volumes = list.data?.data ?? [];
  usePollWhile(
    volumes.some((v) => isTransitional('volume', v.status)),
    list.reload,
  );
  const [panel, setPanel] = useState<Panel | null>(null);
  const { error, attempt } = useAttempt();
  const [notice, setNotice] = useState<string | null>(null);
  const { ask, dialog } = useConfirm();
  const instanceName = (id: string | null) =>
    id ? (instances.data?.find((i) => i.id === id)?.name ?? id) : '—';

  const act = (work: () => Promise<unknown>, done?: string) => {
    setNotice(null);
    return attempt(async () => {
      await work();
      if (done) setNotice(done);
      list.reload();
    });
  };
  const detach = (v: Volume) =>
    ask(
      `Detach ${v.name}?`,
      `Unmount it inside ${instanceName(v.instance_id)} first, or writes in flight are lost.`,
      'Detach',
      () => act(() => unwrap(api.POST('/v1/volumes/{id}/detach', { params: { path: { id: v.id } } }))),
    );
  const remove = (v: Volume) =>
    ask(`Delete ${v.name}?`, 'Its data is gone for good; its snapshots stay.', 'Delete', () =>
      act(() => unwrap(api.DELETE('/v1/volumes/{id}', { params: { path: { id: v.id } } }))),
    );

  const columns: Column<Volume>[] = [
    { label: 'Name', render: (v) => v.name },
    { label: 'Status', render: (v) => <StatusBadge status={v.status} /> },
    { label: 'Size', render: (v) => `${v.size_gb} GB` },
    { label: 'Region', render: (v) => v.region },
    { label: 'Kind', render: (v) => v.kind },
    {
      label: 'Attached to',
      render: (v) =>
        v.instance_id ? (
          <a href={`/console/instances/${v.instance_id}`}>{instanceName(v.instance_id)}</a>
        ) : (
          '—'
        ),
    },
    { label: 'Device', render: (v) => (v.device_name ? <code>{v.device_name}</code> : '—') },
    { label: 'Tags', render: (v) => formatTags(v.tags) || '—' },
    { label: 'Protected', render: (v) => (v.protection.delete ? 'Yes' : 'No') },
    {
      label: 'Actions',
      render: (v) => (
        <div class="row-actions">
          {allows('volume', 'update', v.status) && (
            <button
              type="button"
              aria-label={`Edit ${v.name}`}
              onClick={() => setPanel({ kind: 'edit', volume: v })}
            >
              Edit
            </button>
          )}
          {v.kind === 'root' ? (
            <span class="muted">Follows its instance</span>
          ) : (
            <>
              {/* Beyond the status, the server refuses attach and delete on an instance, detach on none. */}
              {allows('volume', 'attach', v.status) && v.instance_id === null && (
                <button
                  type="button"
                  aria-label={`Attach ${v.name}`}
                  onClick={() => setPanel({ kind: 'attach', volume: v })}
                >
                  Attach
                </button>
              )}
              {allows('volume', 'detach', v.status) && v.instance_id !== null && (
                <button type="button" aria-label={`Detach ${v.name}`} onClick={() => detach(v)}>
                  Detach
                </button>
              )}
              {allows('volume', 'resize', v.status) && (
                <button
                  type="button"
                  aria-label={`Resize ${v.name}`}
                  onClick={() => setPanel({ kind: 'resize', volume: v })}
                >
                  Resize
                </button>
              )}
              {snapshotSourceAllows('volume', v.status) && (
                <button
                  type="button"
                  aria-label={`Snapshot ${v.name}`}
                  onClick={() => setPanel({ kind: 'snapshot', volume: v })}
                >
                  Snapshot
                </button>
              )}
              {allows('volume', 'delete', v.status) && v.instance_id === null && (
                <button
                  type="button"
                  class="danger"
                  aria-label={`Delete ${v.name}`}
                  onClick={() => remove(v)}
                >
                  Delete
                </button>
              )}
            </>
          )}
        </div>
      ),
    },
  ];

  const closePanel = () => setPanel(null);
  return (
    <section>
      <div class="page-head">
        <h1>Volumes</h1>
        <button type="button" class="primary" onClick={() => setPanel({ kind: 'create' })}>
          Create volume
        </button>
      </div>
      {panel?.kind === 'create' && (
        <CreateVolumeForm
          instances={instances.data ?? []}
          onCancel={closePanel}
          onCreated={(name) => {
            closePanel();
            setNotice(`Volume ${name} is being created.`);
            list.reload();
          }}
        />
      )}
      {panel?.kind === 'edit' && (
        <NameTagsDialog
          title={`Edit volume ${panel.volume.name}`}
          resource={panel.volume}
          save={(body) =>
            unwrap(api.PATCH('/v1/volumes/{id}', { params: { path: { id: panel.volume.id } }, body }))
          }
          onCancel={closePanel}
          onSaved={() => {
            closePanel();
            list.reload();
          }}
        />
      )}
      {panel?.kind === 'attach' && (
        <InstancePickerDialog
          title={`Attach ${panel.volume.name}`}
          submitLabel="Attach"
          region={panel.volume.region}
          noneMessage={`No instance in ${panel.volume.region} can take this volume: create one there first.`}
          instances={(instances.data ?? []).filter(
            (i) => i.region === panel.volume.region && i.status !== 'deleting',
          )}
          onCancel={closePanel}
          onSubmit={(instanceId) => {
            closePanel();
            void act(() =>
              unwrap(
                api.POST('/v1/volumes/{id}/attach', {
                  params: { path: { id: panel.volume.id } },
                  body: { instance_id: instanceId },
                }),
              ),
            );
          }}
        />
      )}
      {panel?.kind === 'resize' && (
        <ResizeForm
          volume={panel.volume}
          onCancel={closePanel}
          onSubmit={(sizeGb) => {
            closePanel();
            void act(() =>
              unwrap(
                api.POST('/v1/volumes/{id}/resize', {
                  params: { path: { id: panel.volume.id } },
                  body: { size_gb: sizeGb },
                }),
              ),
            );
          }}
        />
      )}
      {panel?.kind === 'snapshot' && (
        <SnapshotForm
          volume={panel.volume}
          onCancel={closePanel}
          onSubmit={(name) => {
            closePanel();
            void act(
              () => unwrap(api.POST('/v1/snapshots', { body: { name, volume_id: panel.volume.id } })),
              `Snapshot ${name} is being taken: see Snapshots.`,
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
      {list.data && volumes.length === 0 ? (
        <EmptyState title="No volumes yet">
          <p>
            Create a volume for data that should outlive an instance, then attach it to one in its region.
          </p>
          <button type="button" class="primary" onClick={() => setPanel({ kind: 'create' })}>
            Create volume
          </button>
        </EmptyState>
      ) : (
        <Table caption="Volumes" columns={columns} rows={volumes} rowKey={(v) => v.id} />
      )}
      {list.data && <Pager page={page} totalPages={list.data.pagination.total_pages} onPage={setPage} />}
      {dialog}
    </section>
  );
}

type InstanceChoice = Schemas['Instance'];

function CreateVolumeForm(props: {
  instances: InstanceChoice[];
  onCancel: () => void;
  onCreated: (name: string) => void;
}) {
  const [name, setName] = useState('');
  const [size, setSize] = useState('10');
  const [region, setRegion] = useState<Region>('us-east-1');
  const [filesystem, setFilesystem] = useState<'' | 'ext4' | 'xfs'>('ext4');
  const [instanceId, setInstanceId] = useState('');
  const candidates = props.instances.filter((i) => i.region === region && i.status !== 'deleting');

  const submit = async () => {
    const answer = await unwrap(
      currentSession().api.POST('/v1/volumes', {
        body: {
          name,
          size_gb: Number(size),
          region,
          ...(filesystem ? { filesystem } : {}),
          ...(instanceId ? { instance_id: instanceId } : {}),
        },
      }),
    );
    props.onCreated(answer.data.name);
  };

  return (
    <FormDialog title="Create volume" submitLabel="Create" onSubmit={submit} onCancel={props.onCancel}>
      <div class="field-row">
        <TextField label="Name" required value={name} onValue={setName} />
        <TextField
          label="Size (GB)"
          type="number"
          min={1}
          max={16384}
          required
          value={size}
          onValue={setSize}
        />
        <SelectField
          label="Region"
          value={region}
          options={REGIONS}
          onValue={(next) => {
            setRegion(next);
            setInstanceId('');
          }}
        />
        <SelectField
          label="Filesystem"
          value={filesystem}
          options={[
            { value: 'ext4', label: 'ext4' },
            { value: 'xfs', label: 'xfs' },
            { value: '', label: 'None (raw disk)' },
          ]}
          onValue={setFilesystem}
        />
        <SelectField
          label="Attach to (optional)"
          value={instanceId}
          options={[
            { value: '', label: 'Do not attach' },
            ...candidates.map((i) => ({ value: i.id, label: i.name })),
          ]}
          onValue={setInstanceId}
        />
      </div>
    </FormDialog>
  );
}

function ResizeForm(props: { volume: Volume; onCancel: () => void; onSubmit: (sizeGb: number) => void }) {
  const [size, setSize] = useState(String(props.volume.size_gb + 1));
  return (
    <FormDialog
      title={`Resize ${props.volume.name}`}
      submitLabel="Resize"
      onSubmit={() => props.onSubmit(Number(size))}
      onCancel={props.onCancel}
    >
      <TextField
        label="New size (GB)"
        type="number"
        min={props.volume.size_gb + 1}
        max={16384}
        required
        hint={`Now ${props.volume.size_gb} GB. Volumes only grow; an attached one grows online.`}
        value={size}
        onValue={setSize}
      />
    </FormDialog>
  );
}

function SnapshotForm(props: { volume: Volume; onCancel: () => void; onSubmit: (name: string) => void }) {
  const [name, setName] = useState(`${props.volume.name}-snap`);
  return (
    <FormDialog
      title={`Snapshot ${props.volume.name}`}
      submitLabel="Take snapshot"
      onSubmit={() => props.onSubmit(name)}
      onCancel={props.onCancel}
    >
      <TextField label="Snapshot name" required value={name} onValue={setName} />
    </FormDialog>
  );
}
