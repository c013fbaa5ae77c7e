/**
 * Firewall rules. Callers see `FirewallRule` records (firewall-record.ts); the table is derived from the
 * record (platform/store/record-table.ts), except that a rule's targets are kept as two columns,
 * `target_instance_ids` and `target_tags`, declared here beside it. JSON lists and the 0/1 `enabled` stay
 * in this module; nothing above it sees the columns.
 */

import { type Static, Type } from '@sinclair/typebox';
import { type Page, type PageRequest, pagination } from '../../platform/domain/pagination.js';
import { targetColumns, targetsOf } from '../../platform/domain/targets.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import { booleanInteger, jsonText, type RowFor, recordRows } from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { FirewallRuleRecord } from './firewall-record.js';
import type { Direction, FIREWALL_RULE_SORTS, FirewallRule, Protocol } from './firewall-rules.js';

export type FirewallRuleSort = (typeof FIREWALL_RULE_SORTS)[number];

export interface FirewallRuleFilters {
  direction?: Direction | undefined;
  protocol?: Protocol | undefined;
  region?: string | undefined;
  enabled?: boolean | undefined;
  /** Only these rules (the ones that apply to an instance); an empty list matches nothing. */
  ids?: readonly string[] | undefined;
}

export type FirewallRuleChanges = Partial<Omit<FirewallRule, 'id' | 'account_id' | 'created_at'>>;

type Targets = FirewallRule['targets'];

/** The columns of a rule: the record's fields, with `targets` kept as one column per part (migration 0006). */
const FirewallRuleColumns = Type.Composite([
  Type.Omit(FirewallRuleRecord, ['targets']),
  Type.Object({
    target_instance_ids: FirewallRuleRecord.properties.targets.properties.instance_ids,
    target_tags: FirewallRuleRecord.properties.targets.properties.tags,
  }),
]);
type StoredRule = Static<typeof FirewallRuleColumns>;

/** Lists, target parts and `enabled` are JSON text and 0/1; every other field is its own column. */
const codecs = {
  sources: jsonText<string[]>(),
  destinations: jsonText<string[]>(),
  target_instance_ids: jsonText<Targets['instance_ids']>(),
  target_tags: jsonText<Targets['tags']>(),
  enabled: booleanInteger,
};

/** The firewall_rules table: the record's fields as columns, the targets as two. */
export type FirewallRulesTable = RowFor<StoredRule, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    firewall_rules: FirewallRulesTable;
  }
}

const rows = recordRows({ table: 'firewall_rules', record: FirewallRuleColumns, codecs });

function fromRow(row: FirewallRulesTable): FirewallRule {
  const { target_instance_ids, target_tags, ...rule } = rows.decode(row);
  return { ...rule, targets: targetsOf({ target_instance_ids, target_tags }) };
}

function toColumns(changes: FirewallRuleChanges): Partial<FirewallRulesTable> {
  const { targets, ...fields } = changes;
  const stored: Partial<StoredRule> =
    targets === undefined ? fields : { ...fields, ...targetColumns(targets) };
  return rows.encode(stored);
}

export async function insertFirewallRule(db: Executor, rule: FirewallRule): Promise<void> {
  await db
    .insertInto('firewall_rules')
    .values(toColumns(rule) as FirewallRulesTable)
    .execute();
}

export async function findFirewallRule(
  db: Executor,
  accountId: string,
  id: string,
): Promise<FirewallRule | undefined> {
  const row = await db
    .selectFrom('firewall_rules')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && fromRow(row);
}

/** The rule, held until the transaction ends (a row lock on PostgreSQL; SQLite writes one at a time). */
export async function lockFirewallRule(
  db: Executor,
  accountId: string,
  id: string,
): Promise<FirewallRule | undefined> {
  let query = db
    .selectFrom('firewall_rules')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row && fromRow(row);
}

export async function updateFirewallRule(
  db: Executor,
  id: string,
  changes: FirewallRuleChanges,
): Promise<FirewallRule | undefined> {
  const row = await db
    .updateTable('firewall_rules')
    .set(toColumns(changes))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

export async function deleteFirewallRule(
  db: Executor,
  accountId: string,
  id: string,
): Promise<FirewallRule | undefined> {
  const row = await db
    .deleteFrom('firewall_rules')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Every rule of the account in the region (an instance's candidates; at most the quota's number). */
export async function firewallRulesInRegion(
  db: Executor,
  accountId: string,
  region: string,
): Promise<FirewallRule[]> {
  const rows = await db
    .selectFrom('firewall_rules')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('region', '=', region)
    .execute();
  return rows.map(fromRow);
}

export async function countFirewallRules(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('firewall_rules')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listFirewallRules(
  db: Executor,
  accountId: string,
  filters: FirewallRuleFilters,
  request: PageRequest<FirewallRuleSort>,
): Promise<Page<FirewallRule>> {
  let query = db.selectFrom('firewall_rules').selectAll().where('account_id', '=', accountId);
  if (filters.direction !== undefined) query = query.where('direction', '=', filters.direction);
  if (filters.protocol !== undefined) query = query.where('protocol', '=', filters.protocol);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  if (filters.enabled !== undefined) query = query.where('enabled', '=', filters.enabled ? 1 : 0);
  if (filters.ids !== undefined) {
    if (filters.ids.length === 0)
      return { items: [], pagination: pagination(request.page, request.limit, 0) };
    query = query.where('id', 'in', filters.ids);
  }
  const page = await fetchPage(query, request);
  return { items: page.items.map(fromRow), pagination: page.pagination };
}
