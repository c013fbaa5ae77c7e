/**
 * Networking → Firewall rules: the account's rules (GET /v1/firewall/rules), create, edit (a dialog from
 * the row, sending only the changed fields), delete after a confirmation, and **Check a packet** (GET
 * /v1/instances/{id}/network/check), which shows the verdict and the rule that decided it, whether one of
 * these rules, the instance's preset or the defaults.
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { useInstanceChoices } from '../components/instance-picker.tsx';
import { type Column, Table } from '../components/table.tsx';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import {
  createBody,
  draftOf,
  NEW_RULE,
  patchBody,
  type RuleDraft,
  takesPorts,
} from './firewall-rule-draft.ts';
import { REGIONS } from './instances.tsx';

type Rule = Schemas['FirewallRule'];
type CheckAnswer =
  paths['/v1/instances/{id}/network/check']['get']['responses'][200]['content']['application/json']['data'];

/** Which instances of its region a rule selects, in words. */
function appliesTo(rule: Rule, instanceName: (id: string) => string): string {
  const parts = [
    ...rule.targets.instance_ids.map(instanceName),
    ...Object.entries(rule.targets.tags).map(([key, value]) => `tagged ${key}=${value}`),
  ];
  return parts.length ? parts.join(', ') : 'every instance';
}

export function FirewallSection() {
  const api = currentSession().api;
  const rules = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/firewall/rules', {
            params: { query: { limit: 100, sort: 'priority', order: 'asc' } },
          }),
        )
      ).data,
    [],
  );
  const instances = useInstanceChoices();
  /** The rule form: inline to create one, or a dialog editing the given rule. */
  const [form, setForm] = useState<{ rule?: Rule } | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();
  const instanceName = (id: string) => instances.data?.find((i) => i.id === id)?.name ?? id;

  const remove = (rule: Rule) =>
    ask(
      `Delete the rule ${rule.name}?`,
      'Traffic it decided is judged by the next rule at once.',
      'Delete',
      () =>
        attempt(async () => {
          await unwrap(api.DELETE('/v1/firewall/rules/{id}', { params: { path: { id: rule.id } } }));
          rules.reload();
        }),
    );

  const columns: Column<Rule>[] = [
    {
      label: 'Name',
      render: (r) => (
        <>
          {r.name}
          {r.description && <small class="muted"> {r.description}</small>}
        </>
      ),
    },
    { label: 'Direction', render: (r) => r.direction },
    { label: 'Action', render: (r) => <span class={`badge badge-${r.action}`}>{r.action}</span> },
    { label: 'Protocol', render: (r) => r.protocol },
    { label: 'Ports', render: (r) => r.ports ?? 'all' },
    {
      label: 'Addresses',
      render: (r) => (r.direction === 'inbound' ? r.sources : r.destinations).join(', '),
    },
    { label: 'Priority', render: (r) => r.priority },
    { label: 'Region', render: (r) => r.region },
    { label: 'Applies to', render: (r) => appliesTo(r, instanceName) },
    { label: 'Enabled', render: (r) => (r.enabled ? 'yes' : 'no') },
    {
      label: 'Actions',
      render: (r) => (
        <div class="row-actions">
          <button type="button" aria-label={`Edit rule ${r.name}`} onClick={() => setForm({ rule: r })}>
            Edit
          </button>
          <button type="button" class="danger" aria-label={`Delete rule ${r.name}`} onClick={() => remove(r)}>
            Delete
          </button>
        </div>
      ),
    },
  ];

  return (
    <section aria-labelledby="firewall-heading">
      <div class="page-head">
        <h2 id="firewall-heading">Firewall rules</h2>
        <button type="button" class="primary" onClick={() => setForm({})}>
          Create rule
        </button>
      </div>
      {form && (
        <RuleForm
          key={form.rule?.id ?? 'new'}
          rule={form.rule}
          onCancel={() => setForm(null)}
          onSaved={() => {
            setForm(null);
            rules.reload();
          }}
        />
      )}
      <ErrorNotice error={error ?? rules.error} />
      {rules.data && rules.data.length === 0 ? (
        <EmptyState title="No firewall rules">
          <p>
            Instances follow their preset (SSH only by default) and the defaults. Create a rule to open or
            close more, then check a packet below to see which rule decides it.
          </p>
        </EmptyState>
      ) : (
        <Table caption="Firewall rules" columns={columns} rows={rules.data ?? []} rowKey={(r) => r.id} />
      )}
      <CheckPacket instances={instances.data} />
      {dialog}
    </section>
  );
}

/**
 * Create a rule (inline, `rule` absent) or edit one (a modal opened from its row, pre-filled; the region
 * is fixed, so it is shown, not offered).
 */
function RuleForm(props: { rule?: Rule; onCancel: () => void; onSaved: () => void }) {
  const { rule } = props;
  const [initial] = useState(() => (rule ? draftOf(rule) : NEW_RULE));
  const [draft, setDraft] = useState(initial);
  const set = (change: Partial<RuleDraft>) => setDraft({ ...draft, ...change });
  const api = currentSession().api;

  const submit = async () => {
    if (!rule) {
      await unwrap(api.POST('/v1/firewall/rules', { body: createBody(draft) }));
    } else {
      const body = patchBody(rule, initial, draft);
      // Nothing changed: the API would refuse an empty PATCH, and there is nothing to save.
      if (Object.keys(body).length > 0)
        await unwrap(api.PATCH('/v1/firewall/rules/{id}', { params: { path: { id: rule.id } }, body }));
    }
    props.onSaved();
  };
  const select = <K extends 'direction' | 'action' | 'protocol' | 'region'>(
    key: K,
    label: string,
    options: readonly RuleDraft[K][],
  ) => (
    <SelectField
      label={label}
      value={draft[key]}
      options={options}
      onValue={(option) => set({ [key]: option } as Partial<RuleDraft>)}
    />
  );

  return (
    <FormDialog
      title={rule ? `Edit rule ${rule.name}` : 'Create firewall rule'}
      submitLabel={rule ? 'Save' : 'Create'}
      modal={Boolean(rule)}
      dialogClass="dialog-wide"
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <div class="field-row">
        <TextField label="Name" required value={draft.name} onValue={(name) => set({ name })} />
        {!rule && select('region', 'Region', REGIONS)}
        {select('direction', 'Direction', ['inbound', 'outbound'])}
        {select('action', 'Action', ['allow', 'deny'])}
        {select('protocol', 'Protocol', ['tcp', 'udp', 'icmp', 'all'])}
        {takesPorts(draft.protocol) && (
          <TextField
            label="Ports"
            required
            placeholder="443 or 8000-8100"
            value={draft.ports}
            onValue={(ports) => set({ ports })}
          />
        )}
        <TextField
          label="Priority"
          type="number"
          min={1}
          max={65535}
          hint="Lower is tried first."
          value={draft.priority}
          onValue={(priority) => set({ priority })}
        />
      </div>
      <TextField
        label="Description (optional)"
        maxLength={500}
        value={draft.description}
        onValue={(description) => set({ description })}
      />
      <TextField
        label={`${draft.direction === 'inbound' ? 'Sources' : 'Destinations'} (CIDR blocks)`}
        placeholder="203.0.113.0/24, 2001:db8::/32"
        hint="Empty means anywhere."
        value={draft.addresses}
        onValue={(addresses) => set({ addresses })}
      />
      <TextField
        label="Only instances tagged (optional)"
        placeholder="role=web, env=prod"
        hint="Instances carrying every one of these tags; empty means every instance of the region."
        value={draft.tags}
        onValue={(tags) => set({ tags })}
      />
      {rule && <p class="muted">In {rule.region}: a rule cannot move to another region.</p>}
      {rule && (
        <label class="check">
          <input
            type="checkbox"
            checked={draft.enabled}
            onChange={(e) => set({ enabled: e.currentTarget.checked })}
          />
          Enabled (a disabled rule stays listed but decides nothing)
        </label>
      )}
    </FormDialog>
  );
}

/** Judges one packet against an instance's effective rules and shows the verdict and the deciding rule. */
function CheckPacket({ instances }: { instances: Schemas['Instance'][] | null }) {
  const [instanceId, setInstanceId] = useState('');
  const [direction, setDirection] = useState<'inbound' | 'outbound'>('inbound');
  const [protocol, setProtocol] = useState<'tcp' | 'udp' | 'icmp'>('tcp');
  const [port, setPort] = useState('22');
  const [address, setAddress] = useState('');
  const [answer, setAnswer] = useState<CheckAnswer | null>(null);
  const { error, attempt } = useAttempt();
  const chosen = instanceId || instances?.[0]?.id || '';

  const submit = (event: Event) => {
    event.preventDefault();
    setAnswer(null);
    void attempt(async () => {
      const reply = await unwrap(
        currentSession().api.GET('/v1/instances/{id}/network/check', {
          params: {
            path: { id: chosen },
            query: {
              direction,
              protocol,
              address: address.trim(),
              ...(protocol === 'icmp' ? {} : { port: Number(port) }),
            },
          },
        }),
      );
      setAnswer(reply.data);
    });
  };

  return (
    <section class="card" aria-labelledby="check-heading">
      <h3 id="check-heading">Check a packet</h3>
      {instances && instances.length === 0 ? (
        <p>Create an instance first: a packet is judged against one instance's rules.</p>
      ) : (
        <form class="stack" onSubmit={submit} aria-label="Check a packet">
          <div class="field-row">
            <SelectField
              label="Instance"
              value={chosen}
              options={(instances ?? []).map((i) => ({ value: i.id, label: i.name }))}
              onValue={setInstanceId}
            />
            <SelectField
              label="Direction"
              value={direction}
              options={['inbound', 'outbound']}
              onValue={setDirection}
            />
            <SelectField
              label="Protocol"
              value={protocol}
              options={['tcp', 'udp', 'icmp']}
              onValue={setProtocol}
            />
            {protocol !== 'icmp' && (
              <TextField
                label="Port"
                type="number"
                min={1}
                max={65535}
                required
                value={port}
                onValue={setPort}
              />
            )}
            <TextField
              label="Address"
              required
              placeholder="198.51.100.7"
              hint="The remote end: where an inbound packet comes from, where an outbound one goes."
              value={address}
              onValue={setAddress}
            />
          </div>
          <div class="actions">
            <button type="submit" class="primary" disabled={!chosen}>
              Check
            </button>
          </div>
        </form>
      )}
      <ErrorNotice error={error} />
      {answer && (
        <div class="notice verdict" role="status" aria-label="Verdict">
          <p>
            Verdict: <span class={`badge badge-${answer.verdict}`}>{answer.verdict}</span>
          </p>
          <p>
            Deciding rule: <strong>{answer.matched_rule.name}</strong> ({answer.matched_rule.source}
            {answer.matched_rule.priority !== null ? `, priority ${answer.matched_rule.priority}` : ''};{' '}
            {answer.matched_rule.action} {answer.matched_rule.protocol}
            {answer.matched_rule.ports ? ` ${answer.matched_rule.ports}` : ''})
          </p>
        </div>
      )}
    </section>
  );
}
