/**
 * `nimbus billing …`: usage so far (or over any range), invoices with their PDF and CSV files, and what a
 * plan would cost. Money is shown as the API gives it: line amounts exact to the micro-dollar, totals to
 * the cent.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import { type Column, printList, printMessage, printOne } from '../output.js';
import { type Session, withSession } from '../session.js';
import { parseTime } from './metrics.js';
import { listCommand } from './resource-commands.js';
import { addCommands, defined, example, type InstanceType, integer, type Region } from './shared.js';

const GROUPS = ['resource', 'resource_type', 'instance_type', 'day'] as const;
type Group = (typeof GROUPS)[number];

/** USD with at least two decimals and no trailing zeros past them: 1 → 1.00, 0.0342470 → 0.034247. */
export function usd(amount: unknown): string {
  if (typeof amount !== 'number') return '-';
  const fixed = amount.toFixed(6).replace(/0+$/, '');
  const [whole, decimals = ''] = fixed.split('.');
  return `${whole}.${decimals.padEnd(2, '0')}`;
}

const quantity = (line: Record<string, unknown>) => `${line.quantity} ${line.unit}`;

/** What the first column of a usage line shows, by how the lines are grouped. */
const GROUP_COLUMN: Record<Group, Column> = {
  resource: { header: 'RESOURCE', value: (line) => line.resource_id },
  resource_type: { header: 'RESOURCE TYPE', value: (line) => line.resource_type },
  instance_type: { header: 'INSTANCE TYPE', value: (line) => line.instance_type },
  day: { header: 'DAY', value: (line) => line.day },
};

function lineColumns(group: Group | null): Column[] {
  const first = GROUP_COLUMN[group ?? 'resource'];
  const columns: Column[] = [
    first,
    { header: 'METER', value: (line) => line.meter },
    { header: 'DESCRIPTION', value: (line) => line.description },
    { header: 'QUANTITY', value: quantity },
    { header: 'UNIT PRICE', value: (line) => (line.unit_price === null ? '-' : usd(line.unit_price)) },
    { header: 'AMOUNT', value: (line) => usd(line.amount) },
    { header: 'RESOURCE TYPE', value: (line) => line.resource_type, wide: true },
    { header: 'INSTANCE TYPE', value: (line) => line.instance_type, wide: true },
  ];
  // The grouping column is not repeated among the wide ones.
  return columns.filter((column, index) => index === 0 || column.header !== first.header);
}

const INVOICE_COLUMNS: Column[] = [
  { header: 'ID', value: (i) => i.id },
  { header: 'NUMBER', value: (i) => i.number },
  { header: 'PERIOD', value: (i) => i.period },
  { header: 'STATUS', value: (i) => i.status },
  { header: 'TOTAL', value: (i) => `${usd(i.total)} ${i.currency}` },
  { header: 'DUE', value: (i) => i.due_at },
  { header: 'PAST DUE', value: (i) => (i.past_due ? 'yes' : 'no'), wide: true },
  { header: 'ISSUED', value: (i) => i.issued_at, wide: true },
  { header: 'PAID', value: (i) => i.paid_at, wide: true },
  { header: 'SUBTOTAL', value: (i) => usd(i.subtotal), wide: true },
];

const ESTIMATE_COLUMNS: Column[] = [
  { header: 'ITEM', value: (line) => line.item },
  { header: 'DESCRIPTION', value: (line) => line.description },
  { header: 'QUANTITY', value: quantity },
  { header: 'UNIT PRICE', value: (line) => usd(line.unit_price) },
  { header: 'AMOUNT', value: (line) => usd(line.amount) },
];

function usageCommand(): Command {
  const command = new Command('usage')
    .description('what the account has used and owes so far (default: this month), line by line')
    .option(
      '--start <time>',
      'ISO 8601, or a time ago such as 7d (default: the start of this month, UTC)',
      (v) => parseTime(v),
    )
    .option('--end <time>', 'ISO 8601, exclusive (default: now)', (v) => parseTime(v))
    .addOption(new Option('--group-by <how>', 'one line per … (default resource)').choices(GROUPS));
  example(
    command,
    'nimbus billing usage',
    'nimbus billing usage --group-by day --start 2026-03-01T00:00:00Z --end 2026-04-01T00:00:00Z',
    'nimbus billing usage --group-by instance_type -o json',
  );
  return command.action(
    withSession<{ start?: string; end?: string; groupBy?: Group }>(async (session, _args, flags) => {
      const query = defined({ start: flags.start, end: flags.end, group_by: flags.groupBy });
      // The API answers a large account's lines a page at a time (totals always whole); the command
      // shows them all, as the usage of the window asked for.
      const first = await session.nimbus.get('/v1/billing/usage', { params: { query } });
      const data = first.data;
      for (let page = 2, more = first.pagination.has_next; more; page++) {
        const next = await session.nimbus.get('/v1/billing/usage', { params: { query: { ...query, page } } });
        data.line_items.push(...next.data.line_items);
        more = next.pagination.has_next;
      }
      if (!session.humanOutput) {
        printOne(data as unknown as Record<string, unknown>, session.out);
        return;
      }
      printList(
        data.line_items as unknown as Record<string, unknown>[],
        lineColumns(data.group_by),
        session.out,
      );
      printMessage(
        `Total ${usd(data.total)} ${data.currency} (exact ${usd(data.subtotal)}), ${data.start} to ${data.end}, as of ${data.as_of}`,
        session.out,
      );
    }),
  );
}

const FORMATS = ['pdf', 'csv'] as const;

function invoicesCommand(): Command {
  const group = new Command('invoices')
    .alias('invoice')
    .description('monthly invoices (draft while the month runs)');
  example(group, 'nimbus billing invoices list', 'nimbus billing invoices download inv_0123 --format pdf');

  const list = listCommand({
    description: 'list invoices, newest period first',
    filters: {
      status: ['--status <status>', 'only this status', ['draft', 'open', 'paid', 'void']],
      period: ['--period <yyyy-mm>', 'only this month, e.g. 2026-03'],
    },
    sorts: ['period_start', 'created_at'],
    examples: ['nimbus billing invoices list', 'nimbus billing invoices list --status open -o json'],
    columns: INVOICE_COLUMNS,
    path: '/v1/billing/invoices',
  });

  const get = new Command('get')
    .description('show an invoice and its lines')
    .argument('<id>', 'invoice id (inv_…)');
  example(get, 'nimbus billing invoices get inv_0123', 'nimbus billing invoices get inv_0123 -o json');
  get.action(
    withSession(async (session, [id]) => {
      const { data } = await session.nimbus.get('/v1/billing/invoices/{id}', {
        params: { path: { id: id! } },
      });
      if (!session.humanOutput) {
        printOne(data as unknown as Record<string, unknown>, session.out);
        return;
      }
      const { line_items: lines, ...invoice } = data;
      printOne(invoice as unknown as Record<string, unknown>, session.out);
      session.out.write('\n');
      printList(lines as unknown as Record<string, unknown>[], lineColumns(null), session.out);
    }),
  );

  const download = new Command('download')
    .description('save an invoice as PDF or CSV')
    .argument('<id>', 'invoice id (inv_…)')
    .addOption(new Option('--format <format>', 'file format').choices(FORMATS).default('pdf'))
    .option('--out <file>', 'where to write it; - for stdout (default: the name the server gives, here)');
  example(
    download,
    'nimbus billing invoices download inv_0123 --format pdf',
    'nimbus billing invoices download inv_0123 --format csv --out march.csv',
  );
  download.action(
    withSession<{ format: (typeof FORMATS)[number]; out?: string }>(async (session, [id], flags) => {
      await downloadInvoice(session, id!, flags.format, flags.out);
    }),
  );
  return addCommands(group, list, get, download);
}

async function downloadInvoice(
  session: Session,
  id: string,
  format: (typeof FORMATS)[number],
  out: string | undefined,
): Promise<void> {
  const init = { params: { path: { id } }, parseAs: 'arrayBuffer' as const };
  // A failed answer is thrown by the SDK as its typed error (404 → exit 4), as for every other call.
  const { data, response } =
    format === 'pdf'
      ? await session.nimbus.api.GET('/v1/billing/invoices/{id}.pdf', init)
      : await session.nimbus.api.GET('/v1/billing/invoices/{id}.csv', init);
  const body = Buffer.from(data as ArrayBuffer);
  if (out === '-') {
    process.stdout.write(body);
    return;
  }
  // The server's file name (e.g. NMB-000001.pdf), never a path: only its last part is taken.
  const offered = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1];
  const file = out ?? path.basename(offered ?? `${id}.${format}`);
  if (file === '' || file === '.' || file === '..') throw new UsageError(`--out ${file}: not a file name`);
  writeFileSync(file, body);
  const saved = {
    id,
    file: path.resolve(file),
    bytes: body.length,
    content_type: response.headers.get('content-type'),
  };
  if (session.humanOutput)
    printMessage(`Saved ${id} (${format.toUpperCase()}, ${body.length} bytes) to ${file}`, session.out);
  else printOne(saved, session.out);
}

interface EstimateFlags {
  type?: string;
  count?: number;
  hours?: number;
  region?: string;
  volumeGb?: number;
  snapshotGb?: number;
  vpnCount?: number;
  publicIpCount?: number;
}

function estimateCommand(): Command {
  const command = new Command('estimate')
    .description('what instances, volumes, snapshots and VPNs would cost, priced as usage is')
    .option('--type <instance-type>', 'instance type (nimbus catalog types)')
    .option('--count <n>', 'how many instances (default 1 with --type)', integer)
    .option('--hours <n>', 'for how long (default 730, a month)', integer)
    .option('--region <region>', 'region (checked against where the type is offered)')
    .option('--volume-gb <n>', 'GB of volumes', integer)
    .option('--snapshot-gb <n>', 'GB of snapshots', integer)
    .option('--vpn-count <n>', 'VPN gateways', integer)
    .option('--public-ip-count <n>', 'public IPs held unassigned', integer);
  example(
    command,
    'nimbus billing estimate --type compute-2x --count 3 --hours 730 --region us-east-1',
    'nimbus billing estimate --type gpu-1x --hours 24 --region us-west-2 --volume-gb 500 -o json',
  );
  return command.action(
    withSession<EstimateFlags>(async (session, _args, flags) => {
      const query = defined({
        instance_type: flags.type as InstanceType | undefined,
        count: flags.count,
        hours: flags.hours,
        region: flags.region as Region | undefined,
        volume_gb: flags.volumeGb,
        snapshot_gb: flags.snapshotGb,
        vpn_count: flags.vpnCount,
        public_ip_count: flags.publicIpCount,
      });
      if (Object.keys(query).length === 0) {
        throw new UsageError(
          'Nothing to estimate: give --type, --volume-gb, --snapshot-gb, --vpn-count or --public-ip-count',
        );
      }
      const { data } = await session.nimbus.get('/v1/billing/estimate', { params: { query } });
      if (!session.humanOutput) {
        printOne(data as unknown as Record<string, unknown>, session.out);
        return;
      }
      printList(data.breakdown as unknown as Record<string, unknown>[], ESTIMATE_COLUMNS, session.out);
      const what = data.instance_type
        ? `${data.count} × ${data.instance_type} in ${data.region ?? 'any region'}, `
        : '';
      printMessage(`Total ${usd(data.total)} ${data.currency} (${what}${data.hours} h)`, session.out);
    }),
  );
}

export function billingCommand(): Command {
  const group = new Command('billing').description('usage, invoices and cost estimates');
  example(
    group,
    'nimbus billing usage',
    'nimbus billing invoices list',
    'nimbus billing estimate --type compute-2x --count 3 --region us-east-1',
  );
  return addCommands(group, usageCommand(), invoicesCommand(), estimateCommand());
}
