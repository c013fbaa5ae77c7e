/**
 * Billing: usage so far this month (GET /v1/billing/usage, by resource, type, instance type or day, and
 * its CSV), the invoices with PDF and CSV downloads (fetched with the key, saved through a Blob URL:
 * download.ts), and a plan calculator of several lines (POST /v1/billing/estimate).
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type Schemas, unwrap } from '../api.ts';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextField } from '../components/field.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { Pager, Table } from '../components/table.tsx';
import { downloadFile } from '../download.ts';
import { formatDate, formatMoney } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { REGIONS } from './instances.tsx';
import { lineSummary, newLine, type PlanLine, planBody } from './plan-estimate.ts';
import './account-billing.css';

type GroupBy = NonNullable<NonNullable<paths['/v1/billing/usage']['get']['parameters']['query']>['group_by']>;
type UsageLine = Schemas['Usage']['line_items'][number];
type Invoice = Schemas['InvoiceSummary'];

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
        <SelectField
          label="Group by"
          value={groupBy}
          options={GROUPINGS}
          onValue={(next) => {
            setGroupBy(next);
            setPage(1);
          }}
        />
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

type PlanAnswer = Schemas['PlanEstimate'];

const NUMBER_FIELDS: { key: keyof PlanLine; label: string; min: number; max: number }[] = [
  { key: 'hours', label: 'Hours (730 = a month)', min: 1, max: 87_600 },
  { key: 'volumeGb', label: 'Volume storage (GB)', min: 0, max: 10_000_000 },
  { key: 'snapshotGb', label: 'Snapshot storage (GB)', min: 0, max: 10_000_000 },
  { key: 'vpnCount', label: 'VPN gateways', min: 0, max: 10_000 },
];
/** The API prices at most this many items at once. */
const MAX_LINES = 100;

/**
 * Estimate a plan of several lines (POST /v1/billing/estimate): each line some instances of a type, storage
 * and VPN gateways for some hours; the answer's total and each line's figures are shown beside the lines
 * they priced (kept as they were sent, so editing the form afterwards cannot mislabel them).
 */
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
  const [lines, setLines] = useState<PlanLine[]>(() => [newLine(1)]);
  const [nextKey, setNextKey] = useState(2);
  const [priced, setPriced] = useState<{ lines: PlanLine[]; answer: PlanAnswer } | null>(null);
  const { error, attempt } = useAttempt();

  const change = (key: number, update: Partial<PlanLine>) =>
    setLines(lines.map((line) => (line.key === key ? { ...line, ...update } : line)));
  const addLine = () => {
    setLines([...lines, newLine(nextKey)]);
    setNextKey(nextKey + 1);
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    const sent = lines;
    const answered = await attempt(async () => {
      const reply = await unwrap(currentSession().api.POST('/v1/billing/estimate', { body: planBody(sent) }));
      setPriced({ lines: sent, answer: reply.data });
    });
    if (!answered) setPriced(null);
  };
  const typeNames = (types.data ?? [{ name: 'compute-2x' }]).map((t) => t.name);

  return (
    <>
      <h2>Estimate a plan</h2>
      <form class="card stack" onSubmit={submit} aria-label="Estimate a plan">
        {lines.map((line, index) => (
          <fieldset key={line.key}>
            <legend>Line {index + 1}</legend>
            <div class="grid-form">
              <SelectField
                label="Instance type"
                value={line.instanceType}
                options={[{ value: '', label: 'No instances' }, ...typeNames]}
                onValue={(instanceType) => change(line.key, { instanceType })}
              />
              {line.instanceType && (
                <NumberField
                  line={line}
                  field="count"
                  label="Instances"
                  min={0}
                  max={10_000}
                  onChange={change}
                />
              )}
              <SelectField
                label="Region"
                value={line.region}
                options={[{ value: '', label: 'Any region' }, ...REGIONS]}
                onValue={(region) => change(line.key, { region })}
              />
              {NUMBER_FIELDS.map((f) => (
                <NumberField
                  key={f.key}
                  line={line}
                  field={f.key}
                  label={f.label}
                  min={f.min}
                  max={f.max}
                  onChange={change}
                />
              ))}
            </div>
            {lines.length > 1 && (
              <div class="actions">
                <button
                  type="button"
                  aria-label={`Remove line ${index + 1}`}
                  onClick={() => setLines(lines.filter((l) => l.key !== line.key))}
                >
                  Remove line
                </button>
              </div>
            )}
          </fieldset>
        ))}
        <ErrorNotice error={error ?? types.error} />
        <div class="actions">
          <button type="button" onClick={addLine} disabled={lines.length >= MAX_LINES}>
            Add line
          </button>
          <button type="submit" class="primary">
            Estimate
          </button>
        </div>
      </form>
      {priced && <PlanFigures lines={priced.lines} answer={priced.answer} />}
    </>
  );
}

function NumberField(props: {
  line: PlanLine;
  field: keyof PlanLine;
  label: string;
  min: number;
  max: number;
  onChange: (key: number, update: Partial<PlanLine>) => void;
}) {
  return (
    <TextField
      label={props.label}
      type="number"
      inputMode="numeric"
      min={props.min}
      max={props.max}
      step={1}
      required
      value={props.line[props.field]}
      onValue={(text) => props.onChange(props.line.key, { [props.field]: text })}
    />
  );
}

/** The plan's total, each line's total, and every line's breakdown, from the API's answer. */
function PlanFigures({ lines, answer }: { lines: PlanLine[]; answer: PlanAnswer }) {
  const rows = answer.items.map((item, index) => ({ item, index, line: lines[index] }));
  const breakdown = rows.flatMap(({ item, index }) =>
    item.breakdown.map((entry) => ({ ...entry, line: index + 1 })),
  );
  return (
    <div aria-live="polite">
      <p class="total">Estimate: {formatMoney(answer.total)}</p>
      <h3>Each line</h3>
      <Table
        caption="Estimate by line"
        rows={rows}
        rowKey={(r) => String(r.index)}
        columns={[
          { label: 'Line', render: (r) => r.index + 1 },
          { label: 'Plan', render: (r) => (r.line ? lineSummary(r.line) : '—') },
          { label: 'Total', render: (r) => formatAmount(r.item.total) },
        ]}
      />
      <h3>Breakdown</h3>
      <Table
        caption="Estimate breakdown"
        rows={breakdown}
        rowKey={(b) => `${b.line}-${b.item}`}
        columns={[
          { label: 'Line', render: (b) => b.line },
          { label: 'Item', render: (b) => b.description },
          { label: 'Quantity', render: (b) => `${Number(b.quantity.toFixed(3))} ${b.unit}` },
          { label: 'Unit price', render: (b) => formatAmount(b.unit_price) },
          { label: 'Amount', render: (b) => formatAmount(b.amount) },
        ]}
      />
    </div>
  );
}
