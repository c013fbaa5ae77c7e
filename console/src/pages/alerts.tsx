/**
 * Alerts: the policies (GET /v1/alerts) with Create alert policy (a metric threshold or an instance state,
 * the instances it targets, the channels it notifies), Edit (the same form in a dialog from the row,
 * sending only what changed), enable/disable, Send test (POST /v1/alerts/{id}/test:
 * each channel's outcome shown in a status notice) and delete after a confirmation;
 * and the incidents (GET /v1/alerts/incidents, or one policy's: GET /v1/alerts/{id}/incidents), firing
 * or resolved, kept live: the page watches the
 * account's instances on the stream, and an alert message changes the table at once (a new firing row, a
 * row turning resolved) and then has the page read again from the API for what the message does not carry
 * (the resolution, the page count).
 */
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { StreamBanner } from '../components/stream-banner.tsx';
import { Pager, Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { type AlertMessage, useLive } from '../live.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import {
  createBody,
  type Metric,
  NEW_POLICY,
  type PolicyDraft,
  patchBody,
  policyDraftOf,
  type Window,
} from './alert-policy-draft.ts';
import './account-billing.css';

type Policy = Schemas['AlertPolicy'];
type TestResult = Schemas['AlertTestResult'];
type Incident = Schemas['AlertIncident'];

const METRICS: { value: Metric; label: string; unit: string }[] = [
  { value: 'cpu_percent', label: 'CPU', unit: '%' },
  { value: 'memory_percent', label: 'Memory used', unit: '%' },
  { value: 'disk_read_bps', label: 'Disk read', unit: 'bytes/s' },
  { value: 'disk_write_bps', label: 'Disk write', unit: 'bytes/s' },
  { value: 'net_rx_bps', label: 'Network in', unit: 'bytes/s' },
  { value: 'net_tx_bps', label: 'Network out', unit: 'bytes/s' },
  { value: 'gpu_percent', label: 'GPU', unit: '%' },
];
const WINDOWS: Window[] = ['1m', '5m', '10m', '30m', '1h'];

function conditionOf(policy: Policy): string {
  if (policy.state === 'error') return 'instance in error';
  if (policy.state === 'stuck') return `stuck starting or stopping for ${policy.window}`;
  const metric = METRICS.find((m) => m.value === policy.metric);
  return `${metric?.label ?? policy.metric} ${policy.compare} ${policy.threshold}${metric?.unit === '%' ? '%' : ` ${metric?.unit}`} over ${policy.window}`;
}

function targetsOf(policy: Policy): string {
  const parts = [
    ...policy.targets.instance_ids,
    ...Object.entries(policy.targets.tags).map(([key, value]) => `${key}=${value}`),
  ];
  return parts.length > 0 ? parts.join(', ') : 'every instance';
}

/** What a channel test answered, one line per channel target (e.g. `email ops@example.com: succeeded`). */
export function testOutcomes(result: TestResult): string[] {
  return result.results.map(
    (r) => `${r.channel} ${r.target}: ${r.status}${r.error ? ` (${r.error})` : ''}, ${r.duration_ms} ms`,
  );
}

function channelsOf(policy: Policy): string {
  return [
    ...policy.channels.email,
    ...policy.channels.webhook_ids.map((id) => `webhook ${id}`),
    ...policy.channels.chat.map((chat) => `${chat.format} chat`),
  ].join(', ');
}

export function AlertsPage() {
  const api = currentSession().api;
  const policies = useLoad(
    async () => (await unwrap(api.GET('/v1/alerts', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<Policy | null>(null);
  const [tested, setTested] = useState<{ name: string; outcomes: string[] } | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();

  const sendTest = (policy: Policy) => {
    setTested(null);
    return attempt(async () => {
      const answer = await unwrap(api.POST('/v1/alerts/{id}/test', { params: { path: { id: policy.id } } }));
      setTested({ name: policy.name, outcomes: testOutcomes(answer.data) });
    });
  };
  const toggle = (policy: Policy) =>
    attempt(async () => {
      await unwrap(
        api.PATCH('/v1/alerts/{id}', {
          params: { path: { id: policy.id } },
          body: { enabled: !policy.enabled },
        }),
      );
      policies.reload();
    });
  const remove = (policy: Policy) =>
    ask(
      `Delete the alert policy ${policy.name}?`,
      'Its firing incidents are resolved (with a last message on every channel), then it is gone with its history.',
      'Delete',
      () =>
        attempt(async () => {
          await unwrap(api.DELETE('/v1/alerts/{id}', { params: { path: { id: policy.id } } }));
          policies.reload();
        }),
    );
  const names = new Map((policies.data ?? []).map((p) => [p.id, p.name]));

  return (
    <section class="narrow-safe">
      <div class="page-head">
        <h1>Alerts</h1>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create alert policy
        </button>
      </div>
      {creating && (
        <PolicyForm
          onCancel={() => setCreating(false)}
          onSaved={() => {
            setCreating(false);
            policies.reload();
          }}
        />
      )}
      {editing && (
        <PolicyForm
          policy={editing}
          onCancel={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            policies.reload();
          }}
        />
      )}
      <h2>Policies</h2>
      {tested && (
        <div class="notice" role="status" aria-label="Test notification">
          <p>
            Test of <strong>{tested.name}</strong>
            {tested.outcomes.length === 0 ? ': the policy has no channel to notify.' : ':'}
          </p>
          {tested.outcomes.length > 0 && (
            <ul>
              {tested.outcomes.map((line) => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          )}
          <div class="actions">
            <button type="button" onClick={() => setTested(null)}>
              Dismiss
            </button>
          </div>
        </div>
      )}
      <ErrorNotice error={error ?? policies.error} />
      {policies.data && policies.data.length === 0 ? (
        <EmptyState title="No alert policies">
          <p>
            Create a policy to be told by e-mail, webhook or chat when an instance's CPU, memory, disk or
            network crosses a threshold, or when it lands in error.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="Alert policies"
          rows={policies.data ?? []}
          rowKey={(p) => p.id}
          columns={[
            { label: 'Name', render: (p) => p.name },
            { label: 'Condition', render: conditionOf },
            { label: 'Targets', render: targetsOf },
            { label: 'Channels', render: channelsOf },
            { label: 'State', render: (p) => <StatusBadge status={p.enabled ? 'enabled' : 'disabled'} /> },
            {
              label: 'Actions',
              render: (p) => (
                <div class="row-actions">
                  <button
                    type="button"
                    aria-label={`${p.enabled ? 'Disable' : 'Enable'} ${p.name}`}
                    onClick={() => toggle(p)}
                  >
                    {p.enabled ? 'Disable' : 'Enable'}
                  </button>
                  <button type="button" aria-label={`Edit ${p.name}`} onClick={() => setEditing(p)}>
                    Edit
                  </button>
                  <button type="button" aria-label={`Send test of ${p.name}`} onClick={() => sendTest(p)}>
                    Send test
                  </button>
                  <button
                    type="button"
                    class="danger"
                    aria-label={`Delete ${p.name}`}
                    onClick={() => remove(p)}
                  >
                    Delete
                  </button>
                </div>
              ),
            },
          ]}
        />
      )}
      <Incidents policyNames={names} />
      {dialog}
    </section>
  );
}

/** Incidents a page shows, and the stream watches at most this many instances (the API's own cap). */
const INCIDENTS_PER_PAGE = 20;
const WATCHED_INSTANCES = 100;
/**
 * After an alert message the page reads its incidents again once this long after the first of a burst
 * (a collection can fire many incidents at once: one read for all of them, not one each).
 */
export const REREAD_AFTER_MS = 250;

export interface IncidentView {
  status: '' | Incident['status'];
  page: number;
  /** One policy's incidents only (GET /v1/alerts/{id}/incidents); absent or empty: every policy's. */
  policyId?: string;
}

/**
 * The incident rows as an alert message leaves them: a resolved incident's row turns resolved (or leaves
 * a Firing-only list); a new firing incident goes on top of the first page when the filters take it (its
 * status, and its policy when the list shows one policy's; the API lists newest first). A message the rows already reflect changes nothing.
 */
export function withAlert(
  rows: readonly Incident[],
  message: AlertMessage,
  view: IncidentView,
  instanceName: string,
): Incident[] {
  const known = rows.find((row) => row.id === message.incident_id);
  if (message.event === 'alert.resolved') {
    if (!known || known.status === 'resolved') return [...rows];
    if (view.status === 'firing') return rows.filter((row) => row !== known);
    return rows.map((row) =>
      row === known
        ? { ...row, status: 'resolved', resolved_value: message.value, resolved_at: message.resolved_at }
        : row,
    );
  }
  if (
    known ||
    view.page !== 1 ||
    view.status === 'resolved' ||
    (view.policyId && view.policyId !== message.policy_id)
  )
    return [...rows];
  const opened: Incident = {
    id: message.incident_id,
    policy_id: message.policy_id,
    instance_id: message.instance_id,
    instance_name: instanceName,
    status: 'firing',
    value: message.value,
    threshold: message.threshold,
    resolved_value: null,
    resolution: null,
    started_at: message.started_at,
    resolved_at: null,
    notifications: [],
  };
  return [opened, ...rows].slice(0, INCIDENTS_PER_PAGE);
}

/** One line for the page's live region: what just happened, for screen readers and a glance. */
export function alertNews(message: AlertMessage, instanceName: string): string {
  const value = message.value === null ? '' : ` (value ${message.value})`;
  return message.event === 'alert.firing'
    ? `${message.name} is firing on ${instanceName}${value}.`
    : `${message.name} resolved on ${instanceName}${value}.`;
}

function Incidents({ policyNames }: { policyNames: Map<string, string> }) {
  const [status, setStatus] = useState<IncidentView['status']>('');
  const [policyId, setPolicyId] = useState('');
  const [page, setPage] = useState(1);
  const api = currentSession().api;
  const incidents = useLoad(() => {
    const query = { page, limit: INCIDENTS_PER_PAGE, ...(status ? { status } : {}) };
    return unwrap(
      policyId
        ? api.GET('/v1/alerts/{id}/incidents', { params: { path: { id: policyId }, query } })
        : api.GET('/v1/alerts/incidents', { params: { query } }),
    );
  }, [status, policyId, page]);
  // The instances whose alert messages the page hears: the newest the stream can watch at once.
  const instances = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/instances', {
            params: { query: { limit: WATCHED_INSTANCES, sort: 'created_at', order: 'desc' } },
          }),
        )
      ).data,
    [],
  );
  // The rows as alert messages changed them, kept with the API answer they changed: the next answer
  // (read after the messages, so it has them too) replaces them.
  const [changed, setChanged] = useState<{ base: unknown; rows: Incident[] } | null>(null);
  const rows = (changed?.base === incidents.data ? changed?.rows : null) ?? incidents.data?.data ?? [];
  const [news, setNews] = useState('');
  const reread = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const nameOf = (instanceId: string) =>
    instances.data?.find((instance) => instance.id === instanceId)?.name ?? instanceId;
  const live = useLive({
    instances: (instances.data ?? []).map((instance) => instance.id),
    onAlert: (message) => {
      const name = nameOf(message.instance_id);
      const base = incidents.data;
      setChanged((last) => ({
        base,
        rows: withAlert(
          (last?.base === base ? last?.rows : null) ?? base?.data ?? [],
          message,
          { status, page, policyId },
          name,
        ),
      }));
      setNews(alertNews(message, name));
      if (reread.current === undefined) {
        reread.current = setTimeout(() => {
          reread.current = undefined;
          incidents.reload();
        }, REREAD_AFTER_MS);
      }
    },
  });
  const unwatched = (instances.data?.length ?? 0) >= WATCHED_INSTANCES;
  useEffect(() => () => clearTimeout(reread.current), []);

  return (
    <>
      <h2>Incidents</h2>
      <StreamBanner state={live.state} />
      <p class="muted" role="status">
        {news}
      </p>
      {unwatched && (
        <p class="muted">
          Live for the {WATCHED_INSTANCES} newest instances; incidents of older ones show when the page is
          opened again.
        </p>
      )}
      <div class="filters">
        <SelectField
          label="Status"
          value={status}
          options={[
            { value: '', label: 'Firing and resolved' },
            { value: 'firing', label: 'Firing' },
            { value: 'resolved', label: 'Resolved' },
          ]}
          onValue={(next) => {
            setStatus(next);
            setPage(1);
          }}
        />
        <SelectField
          label="Policy"
          value={policyId}
          options={[
            { value: '', label: 'Every policy' },
            ...[...policyNames].map(([id, name]) => ({ value: id, label: name })),
          ]}
          onValue={(next) => {
            setPolicyId(next);
            setPage(1);
          }}
        />
      </div>
      <ErrorNotice error={incidents.error ?? instances.error} />
      {incidents.data && rows.length === 0 ? (
        <EmptyState title={status === 'firing' ? 'Nothing is firing' : 'No incidents'}>
          <p>
            An incident opens when a policy's condition holds for a whole window, and resolves on its own;
            this list changes as they do.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="Alert incidents"
          rows={rows}
          rowKey={(i) => i.id}
          columns={[
            { label: 'Status', render: (i) => <StatusBadge status={i.status} /> },
            { label: 'Policy', render: (i) => policyNames.get(i.policy_id) ?? i.policy_id },
            {
              label: 'Instance',
              render: (i) => <a href={`/console/instances/${i.instance_id}`}>{i.instance_name}</a>,
            },
            {
              label: 'Value',
              render: (i) => (i.value === null ? '—' : `${i.value} (threshold ${i.threshold ?? '—'})`),
            },
            { label: 'Started', render: (i) => formatDate(i.started_at) },
            {
              label: 'Resolved',
              render: (i) =>
                i.resolved_at
                  ? `${formatDate(i.resolved_at)}${i.resolution ? ` (${i.resolution})` : ''}`
                  : '—',
            },
          ]}
        />
      )}
      {incidents.data && (
        <Pager page={page} totalPages={incidents.data.pagination.total_pages} onPage={setPage} />
      )}
    </>
  );
}

/**
 * Create a policy (inline, `policy` absent) or edit one (a modal opened from its row, pre-filled, sending
 * only the parts that changed). The form edits one chat channel; a policy's further chat channels are kept.
 */
function PolicyForm(props: { policy?: Policy; onCancel: () => void; onSaved: () => void }) {
  const { policy } = props;
  const api = currentSession().api;
  const webhooks = useLoad(
    async () => (await unwrap(api.GET('/v1/webhooks', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  const instances = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/instances', { params: { query: { limit: 100, sort: 'name', order: 'asc' } } }),
        )
      ).data,
    [],
  );
  const [initial] = useState(() => (policy ? policyDraftOf(policy) : NEW_POLICY));
  const [draft, setDraft] = useState(initial);
  const set = (change: Partial<PolicyDraft>) => setDraft({ ...draft, ...change });
  const id = useId();
  const submit = async () => {
    if (!policy) {
      await unwrap(api.POST('/v1/alerts', { body: createBody(draft) }));
    } else {
      const body = patchBody(initial, draft);
      // Nothing changed: the API refuses an empty PATCH, and there is nothing to save.
      if (Object.keys(body).length > 0)
        await unwrap(api.PATCH('/v1/alerts/{id}', { params: { path: { id: policy.id } }, body }));
    }
    props.onSaved();
  };
  const toggled = (ids: string[], value: string, on: boolean) =>
    on ? [...ids, value] : ids.filter((x) => x !== value);

  return (
    <FormDialog
      title={policy ? `Edit alert policy ${policy.name}` : 'Create alert policy'}
      submitLabel={policy ? 'Save' : 'Create policy'}
      modal={Boolean(policy)}
      dialogClass="dialog-wide"
      onSubmit={submit}
      onCancel={props.onCancel}
      error={webhooks.error ?? instances.error}
    >
      <div class="grid-form">
        <TextField label="Policy name" required value={draft.name} onValue={(name) => set({ name })} />
        <TextField
          label="Description (optional)"
          value={draft.description}
          onValue={(description) => set({ description })}
        />
      </div>
      <fieldset>
        <legend>Watch</legend>
        <label class="check">
          <input
            type="radio"
            name={`${id}-kind`}
            checked={draft.kind === 'metric'}
            onChange={() => set({ kind: 'metric' })}
          />
          A metric crossing a threshold
        </label>
        <label class="check">
          <input
            type="radio"
            name={`${id}-kind`}
            checked={draft.kind === 'error'}
            onChange={() => set({ kind: 'error' })}
          />
          An instance in error
        </label>
        <label class="check">
          <input
            type="radio"
            name={`${id}-kind`}
            checked={draft.kind === 'stuck'}
            onChange={() => set({ kind: 'stuck' })}
          />
          An instance stuck starting or stopping
        </label>
      </fieldset>
      <div class="grid-form">
        {draft.kind === 'metric' && (
          <>
            <SelectField
              label="Metric"
              value={draft.metric}
              options={METRICS.map((m) => ({ value: m.value, label: `${m.label} (${m.unit})` }))}
              onValue={(metric) => set({ metric })}
            />
            <SelectField
              label="Compare"
              value={draft.compare}
              options={['above', 'below']}
              onValue={(compare) => set({ compare })}
            />
            <TextField
              label="Threshold"
              type="number"
              min={0}
              step="any"
              required
              value={draft.threshold}
              onValue={(threshold) => set({ threshold })}
            />
          </>
        )}
        {draft.kind !== 'error' && (
          <SelectField
            label="Window"
            value={draft.window}
            options={WINDOWS}
            onValue={(window) => set({ window })}
          />
        )}
        <TextField
          label="Only instances tagged (optional)"
          wide
          placeholder="env=prod, team=web"
          hint="Every tag given must match; with neither tags nor instances below, every instance is watched."
          value={draft.tags}
          onValue={(tags) => set({ tags })}
        />
      </div>
      {(instances.data ?? []).length > 0 && (
        <fieldset>
          <legend>Only these instances (optional)</legend>
          <div class="permission-grid">
            {(instances.data ?? []).map((instance) => (
              <label key={instance.id} class="check">
                <input
                  type="checkbox"
                  checked={draft.instanceIds.includes(instance.id)}
                  onChange={(e) =>
                    set({ instanceIds: toggled(draft.instanceIds, instance.id, e.currentTarget.checked) })
                  }
                />
                {instance.name}
              </label>
            ))}
          </div>
        </fieldset>
      )}
      <fieldset>
        <legend>Notify (at least one)</legend>
        <div class="grid-form">
          <TextField
            label="E-mail addresses"
            wide
            placeholder="ops@example.com, me@example.com"
            value={draft.emails}
            onValue={(emails) => set({ emails })}
          />
          <TextField
            label="Chat webhook URL"
            type="url"
            value={draft.chatUrl}
            onValue={(chatUrl) => set({ chatUrl })}
          />
          <SelectField
            label="Chat format"
            value={draft.chatFormat}
            options={[
              { value: 'slack', label: 'Slack' },
              { value: 'discord', label: 'Discord' },
              { value: 'generic', label: 'Generic JSON' },
            ]}
            onValue={(chatFormat) => set({ chatFormat })}
          />
        </div>
        {draft.moreChats.length > 0 && (
          <p class="muted">
            Also kept: {draft.moreChats.length} more chat channel{draft.moreChats.length === 1 ? '' : 's'} (
            {draft.moreChats.map((c) => c.url).join(', ')}).
          </p>
        )}
        {(webhooks.data ?? []).map((hook) => (
          <label key={hook.id} class="check">
            <input
              type="checkbox"
              checked={draft.webhookIds.includes(hook.id)}
              onChange={(e) =>
                set({ webhookIds: toggled(draft.webhookIds, hook.id, e.currentTarget.checked) })
              }
            />
            Webhook {hook.url}
          </label>
        ))}
      </fieldset>
    </FormDialog>
  );
}
