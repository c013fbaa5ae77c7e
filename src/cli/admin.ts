/**
 * Operator commands (`bin/nimbus admin …`): they open the same store as the server and call the same
 * services. With Redis configured, changes reach running servers at once; otherwise within the
 * auth-cache lifetime (NIMBUS_AUTH_CACHE_SECONDS).
 */
import { parseArgs } from 'node:util';
import { type Backends, openBackends } from '../composition.js';
import { migrateSimulatorTables } from '../drivers/simulator/machines.js';
import type { Config } from '../platform/config.js';
import { actingAs, OPERATOR } from '../platform/events/actor.js';
import { migrateToLatest, openStore } from '../platform/store/db.js';
import { MIGRATIONS } from '../resources.js';

export class UsageError extends Error {}

export const ADMIN_USAGE = `Usage: nimbus admin <command> [options] [--json]

Commands:
  migrate                                         bring the database schema up to date
  create-account --email E [--name N] [--plan free|professional|enterprise]
                                                  create an account and an API key with every permission
  set-plan --account ID --plan P                  change an account's plan
  set-quota --account ID --name Q --limit N       override one quota of an account
  set-rate-limit --account ID --per-hour N --burst N
                                                  override an account's rate limit
  set-account-status --account ID --status active|past_due|suspended
  list-accounts                                   list every account
  recount (--account ID | --all)                  count the maintained quota usage afresh and repair the
                                                  counters; shows what each counter held and the count
  close-period [--at ISO-TIME]                    close every month that ended by then (default now):
                                                  open its invoices; running it again changes nothing
  invoice-pay --invoice ID                        mark an open invoice paid (a past-due account with no
                                                  other overdue invoice becomes active)
  invoice-void --invoice ID                       void an open invoice (the same for past due)
  images build [--name NAME] [--force]            build the qemu driver's guest image (images help)
  images list                                     the guest images the qemu driver can boot
  network check                                   NIMBUS_NETWORK=ovn: compare OVN's rows (and this host's
                                                  taps and host ports) with the store; exit 1 on drift`;

export interface Output {
  out(line: string): void;
  /** Progress of a long command (the image build), apart from its result; default: out. */
  progress?(line: string): void;
}

type Values = Record<string, string | boolean | undefined>;

function required(values: Values, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value.length === 0) throw new UsageError(`--${name} is required`);
  return value;
}

function wholeNumber(values: Values, name: string): number {
  const text = required(values, name);
  if (!/^\d+$/.test(text)) throw new UsageError(`--${name} must be a whole number`);
  return Number(text);
}

/**
 * Resolves to the exit code: 0, or 1 when a check found what it reports (`network check`: drift);
 * a command that fails throws. `shared`: run on backends that are already open (tests, which share the
 * server's in-process store) instead of opening and closing new ones.
 */
export async function runAdmin(
  argv: string[],
  config: Config,
  output: Output,
  shared?: Backends,
): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help') {
    output.out(ADMIN_USAGE);
    return 0;
  }
  if (command === 'images') {
    // Options of its own; needs neither the store nor the services.
    const { runImages } = await import('./images.js');
    await runImages(rest, config, output);
    return 0;
  }
  // `network check`: a command of two words, its options after them.
  const subcommand = command === 'network' ? rest.shift() : undefined;
  const { values } = parseArgs({
    args: rest,
    options: {
      json: { type: 'boolean', default: false },
      email: { type: 'string' },
      name: { type: 'string' },
      plan: { type: 'string' },
      account: { type: 'string' },
      limit: { type: 'string' },
      'per-hour': { type: 'string' },
      burst: { type: 'string' },
      status: { type: 'string' },
      invoice: { type: 'string' },
      all: { type: 'boolean', default: false },
      at: { type: 'string' },
    },
    strict: true,
  });
  const print = (json: unknown, text: string) => output.out(values.json ? JSON.stringify(json) : text);

  if (command === 'migrate') {
    // Not through openBackends: it migrates on open, which would leave nothing here to report.
    const store = openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    try {
      const applied = await migrateToLatest(store.db, MIGRATIONS);
      // The simulator's tables have a history of their own (drivers/simulator/machines.ts).
      if (config.driver === 'simulator') applied.push(...(await migrateSimulatorTables(store.db)));
      print({ applied }, applied.length > 0 ? `Applied: ${applied.join(', ')}` : 'The schema is up to date');
    } finally {
      await store.close();
    }
    return 0;
  }

  const backends = shared ?? (await openBackends(config));
  const operatorCommand = async (): Promise<number | undefined> => {
    const { accounts } = backends.services;
    switch (command) {
      case 'create-account': {
        const { account, apiKey, sharingEmail } = await accounts.create({
          email: required(values, 'email'),
          name: values.name,
          plan: values.plan,
        });
        // Addresses are contacts, not identities: a shared one is allowed, and worth a look.
        const shared =
          sharingEmail.length > 0
            ? `\nNote: ${sharingEmail.join(', ')} already use${sharingEmail.length === 1 ? 's' : ''} this e-mail address`
            : '';
        print(
          { account_id: account.id, api_key: apiKey.key, accounts_sharing_email: sharingEmail },
          `Created account ${account.id} (${account.plan}) for ${account.email}\nAPI key (shown once): ${apiKey.key}${shared}`,
        );
        return;
      }
      case 'set-plan': {
        const account = await accounts.setPlan(required(values, 'account'), required(values, 'plan'));
        print(
          { account_id: account.id, plan: account.plan },
          `Account ${account.id} is now on the ${account.plan} plan`,
        );
        return;
      }
      case 'set-quota': {
        const accountId = required(values, 'account');
        const quota = await accounts.setQuota(
          accountId,
          required(values, 'name'),
          wholeNumber(values, 'limit'),
        );
        print(
          { account_id: accountId, ...quota },
          `Quota ${quota.name} of ${accountId} is now ${quota.limit}`,
        );
        return;
      }
      case 'set-rate-limit': {
        const { account, rate_limit } = await accounts.setRateLimit(
          required(values, 'account'),
          wholeNumber(values, 'per-hour'),
          wholeNumber(values, 'burst'),
        );
        print(
          { account_id: account.id, per_hour: rate_limit.perHour, burst: rate_limit.burst },
          `Account ${account.id}: ${rate_limit.perHour} requests per hour, burst ${rate_limit.burst}`,
        );
        return;
      }
      case 'set-account-status': {
        const account = await accounts.setStatus(required(values, 'account'), required(values, 'status'));
        print(
          { account_id: account.id, status: account.status },
          `Account ${account.id} is now ${account.status}`,
        );
        return;
      }
      case 'list-accounts': {
        const all = await accounts.list();
        print(
          { accounts: all },
          all.map((a) => `${a.id}  ${a.plan.padEnd(12)} ${a.status.padEnd(9)} ${a.email}`).join('\n') ||
            'No accounts',
        );
        return;
      }
      case 'close-period': {
        const at = values.at === undefined ? new Date() : new Date(String(values.at));
        if (Number.isNaN(at.getTime())) throw new UsageError('--at must be an ISO 8601 time');
        const { billing } = backends.services;
        const result = await billing.closePeriods(values.at === undefined ? billing.now() : at);
        print(
          result,
          result.periods.length > 0
            ? `Closed ${result.periods.join(', ')}: ${result.invoices_opened} invoice(s) opened`
            : 'No period left to close',
        );
        return;
      }
      case 'invoice-pay':
      case 'invoice-void': {
        const action = command === 'invoice-pay' ? 'pay' : 'void';
        const invoice = await backends.services.billing.settle(required(values, 'invoice'), action);
        print(
          { invoice_id: invoice.id, status: invoice.status, account_id: invoice.account_id },
          `Invoice ${invoice.id} is now ${invoice.status}`,
        );
        return;
      }
      case 'recount': {
        if (values.all === (values.account !== undefined))
          throw new UsageError('recount takes --account ID or --all');
        const ids = values.all ? (await accounts.list()).map((a) => a.id) : [required(values, 'account')];
        const results = [];
        for (const accountId of ids) {
          results.push({ account_id: accountId, quotas: await backends.services.quotas.recount(accountId) });
        }
        const drifted = results.flatMap((r) =>
          r.quotas
            .filter((q) => q.counter !== q.counted)
            .map((q) => `${r.account_id} ${q.name}: ${q.counter} → ${q.counted}`),
        );
        print(
          { accounts: results },
          drifted.length > 0
            ? `Repaired ${drifted.length} counter(s):\n${drifted.join('\n')}`
            : `${ids.length} account(s) recounted: every counter was right`,
        );
        return;
      }
      case 'network': {
        if (subcommand !== 'check') throw new UsageError(`Usage: nimbus admin network check [--json]`);
        const drift = (await backends.driver.networkDrift?.()) ?? null;
        if (drift === null) {
          throw new UsageError('network check: only with NIMBUS_DRIVER=qemu and NIMBUS_NETWORK=ovn');
        }
        const lines = [
          ...drift.missing.map((row) => `missing in OVN: ${row}`),
          ...drift.differing.map((row) => `differs in OVN: ${row}`),
          ...drift.extra.map((row) => `extra in OVN: ${row}`),
          ...drift.strayInterfaces.map((what) => `stray on the bridge: ${what}`),
        ];
        print(drift, lines.length > 0 ? lines.join('\n') : 'OVN matches the store');
        // Drift is what the check found, not a failure of the command: the report, and exit 1 for scripts.
        // A reconcile (the server's next start, or the next change of the account) repairs it.
        return lines.length > 0 ? 1 : 0;
      }
      default:
        throw new UsageError(`Unknown admin command "${command}"\n\n${ADMIN_USAGE}`);
    }
  };
  try {
    // Events the command writes (an account's first key, an invoice paid…) are the operator's.
    return (await actingAs(OPERATOR, operatorCommand)) ?? 0;
  } finally {
    if (!shared) await backends.close();
  }
}
