/**
 * Networking → Firewall rules: the account's rules (GET /v1/firewall/rules), create, delete after a
 * confirmation, and **Check a packet** (GET /v1/instances/{id}/network/check), which shows the verdict and
 * the rule that decided it, whether one of these rules, the instance's preset or the defaults.
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { type Column, Table } from '../components/table.tsx';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import { useInstanceChoices } from './volumes.tsx';

type Rule = Schemas['FirewallRule'];
type RuleBody = paths['/v1/firewall/rules']['post']['requestBody']['content']['application/json'];
type CheckAnswer =
  paths['/v1/instances/{id}/network/check']['get']['responses'][200]['content']['application/json']['data'];

/** Blank-separated or comma-separated CIDR blocks; empty means anywhere (the API's default). */
function blocks(text: string): string[] | undefined {
  const list = text
    .split(/[\s,]+/)
    .map((block) => block.trim())
    .filter(Boolean);
  return list.length ? list : undefined;
}

/** `env=prod, role=web` as a tag map; a pair without `=` is a tag key with an empty value. */
function tagMap(text: string): Record<string, string> | undefined {
  const pairs = text
    .split(',')
    .map((pair) => pair.trim())
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair, ''] : [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
    });
  return pairs.length ? Object.fromEntries(pairs) : undefined;
}

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
  const [creating, setCreating] = useState(false);
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
    { label: 'Name', render: (r) => r.name },
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
        <button type="button" class="danger" aria-label={`Delete rule ${r.name}`} onClick={() => remove(r)}>
          Delete
        </button>
      ),
    },
  ];

  return (
    <section aria-labelledby="firewall-heading">
      <div class="page-head">
        <h2 id="firewall-heading">Firewall rules</h2>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create rule
        </button>
      </div>
      {creating && (
        <CreateRuleForm
          onCancel={() => setCreating(false)}
          onCreated={() => {
            setCreating(false);
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

function CreateRuleForm(props: { onCancel: () => void; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [direction, setDirection] = useState<RuleBody['direction']>('inbound');
  const [action, setAction] = useState<RuleBody['action']>('allow');
  const [protocol, setProtocol] = useState<RuleBody['protocol']>('tcp');
  const [ports, setPorts] = useState('');
  const [addresses, setAddresses] = useState('');
  const [priority, setPriority] = useState('1000');
  const [region, setRegion] = useState<RuleBody['region']>('us-east-1');
  const [tags, setTags] = useState('');
  const takesPorts = protocol === 'tcp' || protocol === 'udp';

  const submit = async () => {
    const list = blocks(addresses);
    const targetTags = tagMap(tags);
    await unwrap(
      currentSession().api.POST('/v1/firewall/rules', {
        body: {
          name,
          direction,
          action,
          protocol,
          region,
          priority: Number(priority),
          ...(takesPorts ? { ports: ports.trim() } : {}),
          ...(targetTags ? { targets: { tags: targetTags } } : {}),
          ...(list ? (direction === 'inbound' ? { sources: list } : { destinations: list }) : {}),
        },
      }),
    );
    props.onCreated();
  };

  return (
    <FormDialog title="Create firewall rule" submitLabel="Create" onSubmit={submit} onCancel={props.onCancel}>
      <div class="field-row">
        <div class="field">
          <label for="rule-name">Name</label>
          <input id="rule-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="rule-region">Region</label>
          <select
            id="rule-region"
            value={region}
            onChange={(e) => setRegion(e.currentTarget.value as RuleBody['region'])}
          >
            {REGIONS.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="rule-direction">Direction</label>
          <select
            id="rule-direction"
            value={direction}
            onChange={(e) => setDirection(e.currentTarget.value as RuleBody['direction'])}
          >
            <option>inbound</option>
            <option>outbound</option>
          </select>
        </div>
        <div class="field">
          <label for="rule-action">Action</label>
          <select
            id="rule-action"
            value={action}
            onChange={(e) => setAction(e.currentTarget.value as RuleBody['action'])}
          >
            <option>allow</option>
            <option>deny</option>
          </select>
        </div>
        <div class="field">
          <label for="rule-protocol">Protocol</label>
          <select
            id="rule-protocol"
            value={protocol}
            onChange={(e) => setProtocol(e.currentTarget.value as RuleBody['protocol'])}
          >
            <option>tcp</option>
            <option>udp</option>
            <option>icmp</option>
            <option>all</option>
          </select>
        </div>
        {takesPorts && (
          <div class="field">
            <label for="rule-ports">Ports</label>
            <input
              id="rule-ports"
              required
              placeholder="443 or 8000-8100"
              value={ports}
              onInput={(e) => setPorts(e.currentTarget.value)}
            />
          </div>
        )}
        <div class="field">
          <label for="rule-priority">Priority</label>
          <input
            id="rule-priority"
            type="number"
            min={1}
            max={65535}
            value={priority}
            aria-describedby="rule-priority-hint"
            onInput={(e) => setPriority(e.currentTarget.value)}
          />
          <small id="rule-priority-hint" class="muted">
            Lower is tried first.
          </small>
        </div>
      </div>
      <div class="field">
        <label for="rule-addresses">
          {direction === 'inbound' ? 'Sources' : 'Destinations'} (CIDR blocks)
        </label>
        <input
          id="rule-addresses"
          placeholder="203.0.113.0/24, 2001:db8::/32"
          aria-describedby="rule-addresses-hint"
          value={addresses}
          onInput={(e) => setAddresses(e.currentTarget.value)}
        />
        <small id="rule-addresses-hint" class="muted">
          Empty means anywhere.
        </small>
      </div>
      <div class="field">
        <label for="rule-tags">Only instances tagged (optional)</label>
        <input
          id="rule-tags"
          placeholder="role=web, env=prod"
          aria-describedby="rule-tags-hint"
          value={tags}
          onInput={(e) => setTags(e.currentTarget.value)}
        />
        <small id="rule-tags-hint" class="muted">
          Instances carrying every one of these tags; empty means every instance of the region.
        </small>
      </div>
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
            <div class="field">
              <label for="check-instance">Instance</label>
              <select
                id="check-instance"
                value={chosen}
                onChange={(e) => setInstanceId(e.currentTarget.value)}
              >
                {(instances ?? []).map((i) => (
                  <option key={i.id} value={i.id}>
                    {i.name}
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="check-direction">Direction</label>
              <select
                id="check-direction"
                value={direction}
                onChange={(e) => setDirection(e.currentTarget.value as 'inbound' | 'outbound')}
              >
                <option>inbound</option>
                <option>outbound</option>
              </select>
            </div>
            <div class="field">
              <label for="check-protocol">Protocol</label>
              <select
                id="check-protocol"
                value={protocol}
                onChange={(e) => setProtocol(e.currentTarget.value as 'tcp' | 'udp' | 'icmp')}
              >
                <option>tcp</option>
                <option>udp</option>
                <option>icmp</option>
              </select>
            </div>
            {protocol !== 'icmp' && (
              <div class="field">
                <label for="check-port">Port</label>
                <input
                  id="check-port"
                  type="number"
                  min={1}
                  max={65535}
                  required
                  value={port}
                  onInput={(e) => setPort(e.currentTarget.value)}
                />
              </div>
            )}
            <div class="field">
              <label for="check-address">Address</label>
              <input
                id="check-address"
                required
                placeholder="198.51.100.7"
                aria-describedby="check-address-hint"
                value={address}
                onInput={(e) => setAddress(e.currentTarget.value)}
              />
              <small id="check-address-hint" class="muted">
                The remote end: where an inbound packet comes from, where an outbound one goes.
              </small>
            </div>
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
