/**
 * One instance: its facts (addresses, DNS names, SSH command, settings, volumes, firewall rules), its
 * events, the actions, Edit (name, tags and the other settings: instance-edit.tsx), and charts of CPU, memory, disk and network: history from GET /v1/instances/{id}/metrics for
 * the chosen range, then live points from the instance's stream (which also keeps the badge current).
 */
import { useState } from 'preact/hooks';
import { allows, unwrap } from '../api.ts';
import { Chart } from '../components/chart.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { EventTable } from '../components/event-table.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { StreamBanner } from '../components/stream-banner.tsx';
import { Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLive } from '../live.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { formatTags } from '../tags.ts';
import { InstanceActions } from './instance-actions.tsx';
import { InstanceEditDialog } from './instance-edit.tsx';
import { CHARTS, HISTORY_RANGES, type HistoryRange, useMetricSeries } from './instance-metrics.ts';

export function InstanceDetailPage({ id }: { id: string }) {
  const api = currentSession().api;
  const path = { params: { path: { id } } };
  const instance = useLoad(async () => (await unwrap(api.GET('/v1/instances/{id}', path))).data, [id]);
  const network = useLoad(async () => (await unwrap(api.GET('/v1/instances/{id}/network', path))).data, [id]);
  const events = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/events', { params: { query: { resource_id: id, limit: 20, order: 'desc' } } }),
        )
      ).data,
    [id],
  );
  const [range, setRange] = useState<HistoryRange>('1h');
  const metrics = useMetricSeries(id, range);
  const live = useLive({ instanceId: id, interval: 1, onMetrics: metrics.addLive });
  const [editing, setEditing] = useState(false);

  if (instance.error) return <ErrorNotice error={instance.error} />;
  const i = instance.data;
  if (!i) return <p aria-busy="true">Loading…</p>;
  const status = live.statuses[id] ?? i.status;
  const ssh = `ssh ${i.ssh.port === 22 ? '' : `-p ${i.ssh.port} `}${i.ssh.user}@${i.ssh.host}`;

  return (
    <section>
      <p>
        <a href="/console/instances">← Instances</a>
      </p>
      <div class="page-head">
        <h1>{i.name}</h1>
        <div class="head-actions">
          <StatusBadge status={status} />
          {allows('instance', 'update', status) && (
            <button type="button" aria-label={`Edit ${i.name}`} onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
        </div>
      </div>
      {editing && (
        <InstanceEditDialog
          instance={i}
          onCancel={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            instance.reload();
            // A new firewall preset changes the effective rules below; the change is a new event.
            network.reload();
            events.reload();
          }}
        />
      )}
      <StreamBanner state={live.state} />
      <InstanceActions
        instance={i}
        status={status}
        onStatus={(next) => live.setStatus(id, next)}
        onChanged={instance.reload}
      />
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{i.id}</code>
        </dd>
        <dt>Type</dt>
        <dd>
          {i.instance_type} ({i.vcpus} vCPU, {i.memory_gb} GB RAM, {i.storage_gb} GB disk
          {i.gpu ? `, ${i.gpu.count}× ${i.gpu.model}` : ''})
        </dd>
        <dt>Region</dt>
        <dd>{i.region}</dd>
        <dt>Image</dt>
        <dd>{i.image}</dd>
        <dt>Public IP</dt>
        <dd>
          <code>{i.public_ip}</code>
        </dd>
        <dt>Private IP</dt>
        <dd>
          <code>{i.private_ip}</code>
        </dd>
        <dt>DNS names</dt>
        <dd>
          <code>{i.hostname}</code>, <code>{i.internal_hostname}</code>
        </dd>
        <dt>SSH</dt>
        <dd>
          <code>{ssh}</code>
        </dd>
        <dt>Tags</dt>
        <dd>{formatTags(i.tags) || 'none'}</dd>
        <dt>Firewall preset</dt>
        <dd>{i.firewall_preset}</dd>
        <dt>Monitoring</dt>
        <dd>{i.monitoring ? 'on' : 'off'}</dd>
        <dt>Deletion protection</dt>
        <dd>{i.protection.delete ? 'on (deleting is refused)' : 'off'}</dd>
        <dt>Backups</dt>
        <dd>
          {i.backup_schedule ? `${i.backup_schedule.frequency}, keep ${i.backup_schedule.retention}` : 'none'}
        </dd>
        <dt>Created</dt>
        <dd>{formatDate(i.created_at)}</dd>
      </dl>

      <h2>Metrics</h2>
      <fieldset class="range">
        <legend class="visually-hidden">History range</legend>
        {HISTORY_RANGES.map((r) => (
          <button key={r} type="button" aria-pressed={r === range} onClick={() => setRange(r)}>
            {r}
          </button>
        ))}
      </fieldset>
      <ErrorNotice error={metrics.error} />
      <div class="charts">
        {CHARTS.map((chart) => (
          <Chart
            key={chart.title}
            title={chart.title}
            series={chart.series}
            data={metrics.data[chart.title] ?? [[]]}
            format={chart.format}
          />
        ))}
      </div>

      <h2>Volumes</h2>
      {(i.volumes ?? []).length === 0 ? (
        <p class="muted">Only the root disk. Attach a volume from the Volumes page for more storage.</p>
      ) : (
        <Table
          caption="Volumes"
          rows={i.volumes ?? []}
          rowKey={(v) => v.id}
          columns={[
            { label: 'Name', render: (v) => v.name },
            { label: 'Kind', render: (v) => v.kind },
            { label: 'Size', render: (v) => `${v.size_gb} GB` },
            { label: 'Device', render: (v) => v.device_name ?? '—' },
            { label: 'Status', render: (v) => <StatusBadge status={v.status} /> },
          ]}
        />
      )}

      <h2>Firewall rules</h2>
      <ErrorNotice error={network.error} />
      {network.data && (
        <Table
          caption="Effective firewall rules"
          rows={network.data.firewall_rules}
          rowKey={(r) => `${r.source}-${r.id ?? r.name}-${r.direction}-${r.ports}`}
          columns={[
            { label: 'Rule', render: (r) => r.name },
            { label: 'From', render: (r) => r.source },
            { label: 'Direction', render: (r) => r.direction },
            { label: 'Action', render: (r) => r.action },
            { label: 'Protocol', render: (r) => r.protocol },
            { label: 'Ports', render: (r) => r.ports ?? 'all' },
          ]}
        />
      )}

      <h2>Events</h2>
      <ErrorNotice error={events.error} />
      {events.data && <EventTable caption="Recent events" events={events.data} />}
    </section>
  );
}
