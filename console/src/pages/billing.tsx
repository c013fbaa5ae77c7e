/**
 * Billing: usage so far this month (GET /v1/billing/usage, by resource, type, instance type or day, and
 * its CSV), the invoices with PDF and CSV downloads (fetched with the key, saved through a Blob URL:
 * download.ts), and an estimate calculator (GET /v1/billing/estimate).
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type Schemas, unwrap } from '../api.ts';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { Pager, Table } from '../components/table.tsx';
import { downloadFile } from '../download.ts';
import { formatDate, formatMoney } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import './account-billing.css';

type GroupBy = NonNullable<NonNullable<paths['/v1/billing/usage']['get']['parameters']['query']>['group_by']>;
type UsageLine = Schemas['Usage']['line_items'][number];
type Invoice = Schemas['InvoiceSummary'];
type EstimateQuery = NonNullable<paths['/v1/billing/estimate']['get']['parameters']['query']>;

const GROUPINGS: { value: GroupBy; label: string }[] = [
  { value: 'resource', label: 'Resource' },
  { value: 'day', label: 'Day' },
  { value: 'resource_type', label: 'Resource type' },
  { value: 'instance_type', label: 'Instance type' },
];

/** Exact amounts (6 decimals) as the API gives them, without trailing noise. */
function formatAmount(amount: number): string {
  return `$${amount.toFixed(amount !== 0 && Math.abs(amount) < 0.01 ? 6 : 2)}`;
}

export function BillingPage() {
  return (
    <section class="narrow-safe">
      <h1>Billing</h1>
      <UsageSection />
      <InvoicesSection />
      <EstimateSection />
    </section>
  );
}

function UsageSection() {
  const [groupBy, setGroupBy] = useState<GroupBy>('resource');
  const [page, setPage] = useState(1);
  const { error, attempt } = useAttempt();
  const usage = useLoad(
    () =>
      unwrap(
        currentSession().api.GET('/v1/billing/usage', {
          params: { query: { group_by: groupBy, page, limit: 50 } },
        }),
      ),
    [groupBy, page],
  );
  const answer = usage.data;
  const lines = answer?.data.line_items ?? [];
  const columns = [
    ...(groupBy === 'day' ? [{ label: 'Day', render: (l: UsageLine) => l.day ?? '—' }] : []),
    { label: 'Item', render: (l: UsageLine) => l.description },
    {
      label: 'Resource',
      render: (l: UsageLine) => (l.resource_id ? <code>{l.resource_id}</code> : l.resource_type),
    },
    { label: 'Quantity', render: (l: UsageLine) => `${Number(l.quantity.toFixed(3))} ${l.unit}` },
    {
      label: 'Unit price',
      render: (l: UsageLine) => (l.unit_price === null ? 'several' : formatAmount(l.unit_price)),
    },
    { label: 'Amount', render: (l: UsageLine) => formatAmount(l.amount) },
  ];
  const saveCsv = () =>
    attempt(() => downloadFile(`/v1/billing/usage.csv?group_by=${groupBy}`, 'nimbus-usage.csv'));

  return (
    <>
      <div class="page-head">
        <h2>Usage this month</h2>
        <button type="button" onClick={saveCsv}>
          Download usage CSV
        </button>
      </div>
      <div class="filters">
        <div class="field">
          <label for="usage-group">Group by</label>
          <select
            id="usage-group"
            value={groupBy}
            onChange={(e) => {
              setGroupBy(e.currentTarget.value as GroupBy);
              setPage(1);
            }}
          >
            {GROUPINGS.map((g) => (
              <option key={g.value} value={g.value}>
                {g.label}
              </option>
            ))}
          </select>
        </div>
      </div>
      <ErrorNotice error={error ?? usage.error} />
      {answer && (
        <p>
          <span class="total">Total so far: {formatMoney(answer.data.total)}</span>{' '}
          <span class="muted">
            ({formatDate(answer.data.start)} to {formatDate(answer.data.as_of)})
          </span>
        </p>
      )}
      {answer && lines.length === 0 ? (
        <EmptyState title="Nothing used this month yet">
          <p>
            Usage appears here as soon as something runs: create an instance, a volume or a VPN, or price a
            plan first with the estimate below.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="Usage this month"
          rows={lines}
          rowKey={(l) => `${l.day}-${l.resource_id}-${l.meter}-${l.instance_type}-${l.unit_price}`}
          columns={columns}
        />
      )}
      {answer && <Pager page={page} totalPages={answer.pagination.total_pages} onPage={setPage} />}
    </>
  );
}

function InvoicesSection() {
  const { error, attempt } = useAttempt();
  const [page, setPage] = useState(1);
  const invoices = useLoad(
    () =>
      unwrap(currentSession().api.GET('/v1/billing/invoices', { params: { query: { page, limit: 24 } } })),
    [page],
  );
  const save = (invoice: Invoice, format: 'pdf' | 'csv') =>
    attempt(() =>
      downloadFile(
        `/v1/billing/invoices/${encodeURIComponent(invoice.id)}.${format}`,
        `nimbus-invoice-${invoice.number ?? `draft-${invoice.period}`}.${format}`,
      ),
    );
  const list = invoices.data?.data ?? [];
  return (
    <>
      <h2>Invoices</h2>
      <ErrorNotice error={error ?? invoices.error} />
      {invoices.data && list.length === 0 ? (
        <EmptyState title="No invoices yet">
          <p>
            Each month that used something gets an invoice when it ends; the running month shows as a draft.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="Invoices"
          rows={list}
          rowKey={(i) => i.id}
          columns={[
            { label: 'Period', render: (i) => i.period },
            { label: 'Number', render: (i) => i.number ?? '—' },
            {
              label: 'Status',
              render: (i) => (
                <>
                  <StatusBadge status={i.status} />{' '}
                  {i.past_due && <strong class="badge badge-error">past due</strong>}
                </>
              ),
            },
            { label: 'Total', render: (i) => formatMoney(i.total) },
            { label: 'Issued', render: (i) => formatDate(i.issued_at) },
            { label: 'Due', render: (i) => formatDate(i.due_at) },
            {
              label: 'Download',
              render: (i) => (
                <div class="row-actions">
                  <button
                    type="button"
                    aria-label={`Download invoice ${i.number ?? i.period} as PDF`}
                    onClick={() => save(i, 'pdf')}
                  >
                    PDF
                  </button>
                  <button
                    type="button"
                    aria-label={`Download invoice ${i.number ?? i.period} as CSV`}
                    onClick={() => save(i, 'csv')}
                  >
                    CSV
                  </button>
                </div>
              ),
            },
          ]}
        />
      )}
      {invoices.data && (
        <Pager page={page} totalPages={invoices.data.pagination.total_pages} onPage={setPage} />
      )}
    </>
  );
}

interface EstimateForm {
  instance_type: string;
  count: string;
  hours: string;
  region: string;
  volume_gb: string;
  snapshot_gb: string;
  vpn_count: string;
}

function EstimateSection() {
  const types = useLoad(
    async () =>
      (
        await unwrap(
          currentSession().api.GET('/v1/instance-types', {
            params: { query: { limit: 100, sort: 'price_per_hour' } },
          }),
        )
      ).data,
    [],
  );
  const [form, setForm] = useState<EstimateForm>({
    instance_type: 'compute-2x',
    count: '1',
    hours: '730',
    region: '',
    volume_gb: '0',
    snapshot_gb: '0',
    vpn_count: '0',
  });
  const [estimate, setEstimate] = useState<Schemas['PlanEstimate']['items'][number] | null>(null);
  const { error, attempt } = useAttempt();

  const submit = async (event: Event) => {
    event.preventDefault();
    const query: EstimateQuery = {
      hours: Number(form.hours),
      volume_gb: Number(form.volume_gb),
      snapshot_gb: Number(form.snapshot_gb),
      vpn_count: Number(form.vpn_count),
      ...(form.instance_type
        ? { instance_type: form.instance_type as EstimateQuery['instance_type'], count: Number(form.count) }
        : {}),
      ...(form.region ? { region: form.region as EstimateQuery['region'] } : {}),
    };
    const answered = await attempt(async () =>
      setEstimate(
        (await unwrap(currentSession().api.GET('/v1/billing/estimate', { params: { query } }))).data,
      ),
    );
    if (!answered) setEstimate(null);
  };
  const number = (key: keyof EstimateForm, label: string, min: number, max: number) => (
    <div class="field">
      <label for={`estimate-${key}`}>{label}</label>
      <input
        id={`estimate-${key}`}
        type="number"
        inputMode="numeric"
        min={min}
        max={max}
        step={1}
        required
        value={form[key]}
        onInput={(e) => setForm({ ...form, [key]: e.currentTarget.value })}
      />
    </div>
  );

  return (
    <>
      <h2>Estimate a plan</h2>
      <form class="card" onSubmit={submit} aria-label="Estimate a plan">
        <div class="grid-form">
          <div class="field">
            <label for="estimate-type">Instance type</label>
            <select
              id="estimate-type"
              value={form.instance_type}
              onChange={(e) => setForm({ ...form, instance_type: e.currentTarget.value })}
            >
              <option value="">No instances</option>
              {(types.data ?? [{ name: 'compute-2x' }]).map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name}
                </option>
              ))}
            </select>
          </div>
          {form.instance_type && number('count', 'Instances', 0, 10_000)}
          <div class="field">
            <label for="estimate-region">Region</label>
            <select
              id="estimate-region"
              value={form.region}
              onChange={(e) => setForm({ ...form, region: e.currentTarget.value })}
            >
              <option value="">Any region</option>
              {REGIONS.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          </div>
          {number('hours', 'Hours (730 = a month)', 1, 87_600)}
          {number('volume_gb', 'Volume storage (GB)', 0, 10_000_000)}
          {number('snapshot_gb', 'Snapshot storage (GB)', 0, 10_000_000)}
          {number('vpn_count', 'VPN gateways', 0, 10_000)}
        </div>
        <ErrorNotice error={error ?? types.error} />
        <div class="actions">
          <button type="submit" class="primary">
            Estimate
          </button>
        </div>
      </form>
      {estimate && (
        <div aria-live="polite">
          <p class="total">Estimate: {formatMoney(estimate.total)}</p>
          <Table
            caption="Estimate breakdown"
            rows={estimate.breakdown}
            rowKey={(b) => b.item}
            columns={[
              { label: 'Item', render: (b) => b.description },
              { label: 'Quantity', render: (b) => `${Number(b.quantity.toFixed(3))} ${b.unit}` },
              { label: 'Unit price', render: (b) => formatAmount(b.unit_price) },
              { label: 'Amount', render: (b) => formatAmount(b.amount) },
            ]}
          />
        </div>
      )}
    </>
  );
}
