/**
 * Firewall rules. Rows are decoded into `FirewallRule` records here (JSON lists and targets, the 0/1
 * `enabled`); nothing above this module sees the columns.
 */

import { type Page, type PageRequest, pagination } from '../../platform/domain/pagination.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { Executor, FirewallRuleRow, FirewallRulesTable } from '../../platform/store/schema.js';
import type { Action, Direction, FIREWALL_RULE_SORTS, FirewallRule, Protocol } from './firewall-rules.js';

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

function fromRow(row: FirewallRuleRow): FirewallRule {
  return {
    id: row.id,
    account_id: row.account_id,
    name: row.name,
    description: row.description,
    direction: row.direction as Direction,
    action: row.action as Action,
    protocol: row.protocol as Protocol,
    ports: row.ports,
    sources: JSON.parse(row.sources) as string[],
    destinations: JSON.parse(row.destinations) as string[],
    priority: row.priority,
    targets: {
      instance_ids: JSON.parse(row.target_instance_ids) as string[],
      tags: JSON.parse(row.target_tags) as Record<string, string>,
    },
    region: row.region,
    enabled: row.enabled === 1,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function toColumns(changes: FirewallRuleChanges): Partial<FirewallRulesTable> {
  const { sources, destinations, targets, enabled, ...plain } = changes;
  return {
    ...plain,
    ...(sources !== undefined ? { sources: JSON.stringify(sources) } : {}),
    ...(destinations !== undefined ? { destinations: JSON.stringify(destinations) } : {}),
    ...(targets !== undefined
      ? {
          target_instance_ids: JSON.stringify(targets.instance_ids),
          target_tags: JSON.stringify(targets.tags),
        }
      : {}),
    ...(enabled !== undefined ? { enabled: enabled ? 1 : 0 } : {}),
  };
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
