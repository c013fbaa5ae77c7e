/**
 * Snapshots: the list (GET /v1/snapshots), take one of a volume, edit its name and tags (a dialog opened
 * from its row), restore (as a new volume, over a detached volume of the region, or over a stopped
 * instance's root disk when the snapshot is of a root volume) and delete after a confirmation; the data volumes' backup schedules (PATCH /v1/volumes/{id}). The list is
 * polled only while a snapshot is being made or deleted.
 */
import { useState } from 'preact/hooks';
import { allows, isTransitional, type Schemas, snapshotSourceAllows, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { useInstanceChoices } from '../components/instance-picker.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { type Column, Pager, Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { usePollWhile } from '../poll.ts';
import { currentSession } from '../session.ts';
import { formatTags } from '../tags.ts';
import { useAttempt } from '../use-attempt.ts';
import { NameTagsDialog } from './name-tags-edit.tsx';
import './storage-network.css';

type Snapshot = Schemas['Snapshot'];
type Volume = Schemas['Volume'];
const PAGE_SIZE = 20;

function useVolumeChoices() {
  return useLoad(
    async () =>
      (await unwrap(currentSession().api.GET('/v1/volumes', { params: { query: { limit: 100 } } }))).data,
    [],
  );
}

type Panel =
  | { kind: 'create' }
  | { kind: 'restore'; snapshot: Snapshot }
  | { kind: 'edit'; snapshot: Snapshot };

export function SnapshotsPage() {
  const api = currentSession().api;
  const [page, setPage] = useState(1);
  const list = useLoad(
    () => unwrap(api.GET('/v1/snapshots', { params: { query: { page, limit: PAGE_SIZE } } })),
    [page],
  );
  const volumes = useVolumeChoices();
  const snapshots = list.data?.data ?? [];
  usePollWhile(
    snapshots.some((s) => isTransitional('snapshot', s.status)),
    list.reload,
  );
  const [panel, setPanel] = useState<Panel | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();
  const volumeName = (id: string) => volumes.data?.find((v) => v.id === id)?.name ?? id;

  const remove = (snapshot: Snapshot) =>
    ask(`Delete ${snapshot.name}?`, 'It cannot be restored afterwards.', 'Delete', () => {
      setNotice(null);
      return attempt(async () => {
        await unwrap(api.DELETE('/v1/snapshots/{id}', { params: { path: { id: snapshot.id } } }));
        list.reload();
      });
    });

  const columns: Column<Snapshot>[] = [
    { label: 'Name', render: (s) => s.name },
    {
      label: 'Status',
      render: (s) => (
        <>
          <StatusBadge status={s.status} />
          {s.error && <small class="muted"> {s.error}</small>}
        </>
      ),
    },
    { label: 'Size', render: (s) => `${s.size_gb} GB` },
    { label: 'Region', render: (s) => s.region },
    { label: 'Kind', render: (s) => s.kind },
    { label: 'Tags', render: (s) => formatTags(s.tags) || '—' },
    {
      label: 'Source',
      render: (s) =>
        s.source_instance_id ? (
          <a href={`/console/instances/${s.source_instance_id}`}>root disk of {s.source_instance_id}</a>
        ) : (
          volumeName(s.source_volume_id)
        ),
    },
    { label: 'Created', render: (s) => formatDate(s.created_at) },
    {
      label: 'Actions',
      render: (s) => (
        <div class="row-actions">
          {allows('snapshot', 'update', s.status) && (
            <button
              type="button"
              aria-label={`Edit ${s.name}`}
              onClick={() => setPanel({ kind: 'edit', snapshot: s })}
            >
              Edit
            </button>
          )}
          {allows('snapshot', 'restore', s.status) && (
            <button
              type="button"
              aria-label={`Restore ${s.name}`}
              onClick={() => setPanel({ kind: 'restore', snapshot: s })}
            >
              Restore
            </button>
          )}
          {allows('snapshot', 'delete', s.status) && (
            <button type="button" class="danger" aria-label={`Delete ${s.name}`} onClick={() => remove(s)}>
              Delete
            </button>
          )}
        </div>
      ),
    },
  ];
  const dataVolumes = (volumes.data ?? []).filter((v) => v.kind === 'data');

  return (
    <section>
      <div class="page-head">
        <h1>Snapshots</h1>
        <button type="button" class="primary" onClick={() => setPanel({ kind: 'create' })}>
          Take snapshot
        </button>
      </div>
      {panel?.kind === 'create' && (
        <CreateSnapshotForm
          volumes={(volumes.data ?? []).filter((v) => snapshotSourceAllows('volume', v.status))}
          onCancel={() => setPanel(null)}
          onCreated={(name) => {
            setPanel(null);
            setNotice(`Snapshot ${name} is being taken.`);
            list.reload();
          }}
        />
      )}
      {panel?.kind === 'restore' && (
        <RestoreForm
          snapshot={panel.snapshot}
          volumes={dataVolumes}
          onCancel={() => setPanel(null)}
          onRestored={(what) => {
            setPanel(null);
            setNotice(what);
            volumes.reload();
          }}
        />
      )}
      {panel?.kind === 'edit' && (
        <NameTagsDialog
          title={`Edit snapshot ${panel.snapshot.name}`}
          resource={panel.snapshot}
          save={(body) =>
            unwrap(api.PATCH('/v1/snapshots/{id}', { params: { path: { id: panel.snapshot.id } }, body }))
          }
          onCancel={() => setPanel(null)}
          onSaved={() => {
            setPanel(null);
            list.reload();
          }}
        />
      )}
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ErrorNotice error={error ?? list.error} />
      {list.data && snapshots.length === 0 ? (
        <EmptyState title="No snapshots yet">
          <p>
            Take a snapshot of a volume before a risky change, or give a volume a backup schedule below to
            take them for you.
          </p>
          <button type="button" class="primary" onClick={() => setPanel({ kind: 'create' })}>
            Take snapshot
          </button>
        </EmptyState>
      ) : (
        <Table caption="Snapshots" columns={columns} rows={snapshots} rowKey={(s) => s.id} />
      )}
      {list.data && <Pager page={page} totalPages={list.data.pagination.total_pages} onPage={setPage} />}
      <Schedules volumes={dataVolumes} onChanged={volumes.reload} />
      {dialog}
    </section>
  );
}

function CreateSnapshotForm(props: {
  volumes: Volume[];
  onCancel: () => void;
  onCreated: (name: string) => void;
}) {
  const [volumeId, setVolumeId] = useState('');
  const [name, setName] = useState('');
  const chosen = volumeId || props.volumes[0]?.id || '';
  const submit = async () => {
    const answer = await unwrap(
      currentSession().api.POST('/v1/snapshots', { body: { name, volume_id: chosen } }),
    );
    props.onCreated(answer.data.name);
  };
  return (
    <FormDialog
      title="Take snapshot"
      submitLabel="Take snapshot"
      canSubmit={Boolean(chosen)}
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      {props.volumes.length === 0 ? (
        <p>No volume can be copied now: create one on the Volumes page (or wait for one to be available).</p>
      ) : (
        <div class="field-row">
          <SelectField
            label="Volume"
            value={chosen}
            options={props.volumes.map((v) => ({
              value: v.id,
              label: `${v.name} (${v.kind}, ${v.size_gb} GB, ${v.region})`,
            }))}
            onValue={setVolumeId}
          />
          <TextField label="Name" required value={name} onValue={setName} />
        </div>
      )}
    </FormDialog>
  );
}

type Target = 'new' | 'volume' | 'instance';

function RestoreForm(props: {
  snapshot: Snapshot;
  volumes: Volume[];
  onCancel: () => void;
  onRestored: (what: string) => void;
}) {
  const { snapshot } = props;
  const instances = useInstanceChoices();
  const isRoot = snapshot.source_instance_id !== null;
  const [target, setTarget] = useState<Target>('new');
  const [name, setName] = useState(`${snapshot.name}-restored`);
  const [size, setSize] = useState(String(snapshot.size_gb));
  const [volumeId, setVolumeId] = useState('');
  const [instanceId, setInstanceId] = useState('');
  const overwritable = props.volumes.filter(
    (v) =>
      v.region === snapshot.region &&
      v.instance_id === null &&
      allows('volume', 'restore', v.status) &&
      v.size_gb >= snapshot.size_gb,
  );
  const stopped = (instances.data ?? []).filter(
    (i) => i.region === snapshot.region && i.status === 'stopped',
  );
  const chosenVolume = volumeId || overwritable[0]?.id || '';
  const chosenInstance = instanceId || stopped[0]?.id || '';

  const submit = async () => {
    const body =
      target === 'new'
        ? { name, size_gb: Number(size) }
        : target === 'volume'
          ? { target_volume_id: chosenVolume }
          : { instance_id: chosenInstance };
    const answer = await unwrap(
      currentSession().api.POST('/v1/snapshots/{id}/restore', {
        params: { path: { id: snapshot.id } },
        body,
      }),
    );
    props.onRestored(
      `Restoring ${snapshot.name} into the volume ${answer.data.volume.name}: follow it on the Volumes page.`,
    );
  };

  return (
    <FormDialog
      title={`Restore ${snapshot.name}`}
      submitLabel="Restore"
      canSubmit={!((target === 'volume' && !chosenVolume) || (target === 'instance' && !chosenInstance))}
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <fieldset>
        <legend>Restore {snapshot.name} into</legend>
        <label class="check">
          <input type="radio" name="target" checked={target === 'new'} onChange={() => setTarget('new')} />A
          new volume
        </label>
        <label class="check">
          <input
            type="radio"
            name="target"
            checked={target === 'volume'}
            onChange={() => setTarget('volume')}
          />
          An existing detached volume (overwritten)
        </label>
        {isRoot && (
          <label class="check">
            <input
              type="radio"
              name="target"
              checked={target === 'instance'}
              onChange={() => setTarget('instance')}
            />
            The root disk of a stopped instance (overwritten)
          </label>
        )}
      </fieldset>
      {target === 'new' && (
        <div class="field-row">
          <TextField label="Volume name" required value={name} onValue={setName} />
          <TextField
            label="Size (GB)"
            type="number"
            min={snapshot.size_gb}
            max={16384}
            required
            value={size}
            onValue={setSize}
          />
        </div>
      )}
      {target === 'volume' &&
        (overwritable.length === 0 ? (
          <p>
            No detached volume in {snapshot.region} of at least {snapshot.size_gb} GB: detach one or restore
            into a new volume.
          </p>
        ) : (
          <SelectField
            label="Volume to overwrite"
            value={chosenVolume}
            options={overwritable.map((v) => ({ value: v.id, label: `${v.name} (${v.size_gb} GB)` }))}
            onValue={setVolumeId}
          />
        ))}
      {target === 'instance' &&
        (stopped.length === 0 ? (
          <p>
            No stopped instance in {snapshot.region}: stop the instance whose disk should be replaced first.
          </p>
        ) : (
          <SelectField
            label="Stopped instance"
            value={chosenInstance}
            options={stopped.map((i) => ({ value: i.id, label: i.name }))}
            onValue={setInstanceId}
          />
        ))}
    </FormDialog>
  );
}

type Frequency = 'hourly' | 'daily' | 'weekly';

/** Each data volume's backup schedule: frequency and how many scheduled snapshots to keep. */
function Schedules(props: { volumes: Volume[]; onChanged: () => void }) {
  return (
    <section aria-labelledby="schedules-heading">
      <h2 id="schedules-heading">Backup schedules</h2>
      {props.volumes.length === 0 ? (
        <p class="muted">
          Data volumes can take scheduled snapshots; create one on the Volumes page. An instance's root disk
          follows the instance's own backup schedule.
        </p>
      ) : (
        <Table
          caption="Backup schedules of data volumes"
          rows={props.volumes}
          rowKey={(v) => v.id}
          columns={[
            { label: 'Volume', render: (v) => v.name },
            {
              label: 'Schedule',
              render: (v) =>
                v.backup_schedule
                  ? `${v.backup_schedule.frequency}, keep ${v.backup_schedule.retention}`
                  : 'none',
            },
            { label: 'Change', render: (v) => <ScheduleEditor volume={v} onChanged={props.onChanged} /> },
          ]}
        />
      )}
    </section>
  );
}

function ScheduleEditor({ volume, onChanged }: { volume: Volume; onChanged: () => void }) {
  const [frequency, setFrequency] = useState<Frequency | ''>(
    (volume.backup_schedule?.frequency as Frequency | undefined) ?? '',
  );
  const [retention, setRetention] = useState(String(volume.backup_schedule?.retention ?? 7));
  const { error, attempt } = useAttempt();
  const save = (event: Event) => {
    event.preventDefault();
    void attempt(async () => {
      await unwrap(
        currentSession().api.PATCH('/v1/volumes/{id}', {
          params: { path: { id: volume.id } },
          body: { backup_schedule: frequency ? { frequency, retention: Number(retention) } : null },
        }),
      );
      onChanged();
    });
  };
  return (
    <form class="row-actions" onSubmit={save} aria-label={`Backup schedule of ${volume.name}`}>
      <select
        aria-label={`Frequency for ${volume.name}`}
        value={frequency}
        onChange={(e) => setFrequency(e.currentTarget.value as Frequency | '')}
      >
        <option value="">No schedule</option>
        <option>hourly</option>
        <option>daily</option>
        <option>weekly</option>
      </select>
      {frequency && (
        <input
          aria-label={`Snapshots to keep for ${volume.name}`}
          type="number"
          min={1}
          max={90}
          value={retention}
          onInput={(e) => setRetention(e.currentTarget.value)}
        />
      )}
      <button type="submit">Save</button>
      <ErrorNotice error={error} />
    </form>
  );
}
