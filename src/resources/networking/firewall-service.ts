/**
 * Firewall rules: a plain resource (no lifecycle, nothing for a driver to do), so each change is one
 * transaction that writes the row and its event. Creating one locks the account and checks the
 * `firewall_rules` quota in that transaction, so concurrent creates cannot pass the limit together.
 *
 * The route schema checks each field alone (types, sets, ranges); this module checks what depends on
 * several fields or on the store: ports against the protocol, address lists against the direction,
 * CIDR blocks (refused with host bits set), and target instances (of the account, in the rule's region).
 */
import { CidrError, formatCidr, parseCidrBlock } from '../../platform/domain/cidrs.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { checkTagKeys } from '../../platform/domain/labels.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPrintableText } from '../../platform/domain/validation.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { lockAccount } from '../account/store.js';
import type { Instance } from '../instances/record.js';
import { findAccountInstance } from '../instances/store.js';
import {
  type Action,
  ANYWHERE,
  type Direction,
  type FirewallRule,
  formatPorts,
  MAX_DESCRIPTION_LENGTH,
  type Protocol,
  parsePorts,
  portsProblem,
  selects,
} from './firewall-rules.js';
import * as rules from './firewall-store.js';

export const DEFAULT_PRIORITY = 1000;

/** A rule as the API shows it: its account is the caller's. */
export type FirewallRuleView = Omit<FirewallRule, 'account_id'>;

export interface TargetsInput {
  instance_ids?: string[] | undefined;
  tags?: Record<string, string> | undefined;
}

export interface NewFirewallRule {
  name: string;
  description?: string | undefined;
  direction: Direction;
  action: Action;
  protocol: Protocol;
  ports?: string | null | undefined;
  sources?: string[] | undefined;
  destinations?: string[] | undefined;
  priority?: number | undefined;
  targets?: TargetsInput | undefined;
  region: string;
  enabled?: boolean | undefined;
}

/** Everything but the region, which a rule keeps (its targets are checked against it). */
export type FirewallRuleUpdate = Partial<Omit<NewFirewallRule, 'region'>>;

export interface FirewallRuleListQuery extends PageRequest<rules.FirewallRuleSort> {
  direction?: Direction | undefined;
  protocol?: Protocol | undefined;
  region?: string | undefined;
  enabled?: boolean | undefined;
  instance_id?: string | undefined;
}

/** The fields a rule's checks settle, from a create or from a rule merged with its PATCH. */
type RuleFields = Omit<FirewallRule, 'id' | 'account_id' | 'created_at' | 'updated_at'>;

function view({ account_id: _account, ...shown }: FirewallRule): FirewallRuleView {
  return shown;
}

const eventData = (rule: FirewallRule) => ({
  firewall_rule_id: rule.id,
  name: rule.name,
  region: rule.region,
  direction: rule.direction,
  action: rule.action,
  protocol: rule.protocol,
  ports: rule.ports,
  priority: rule.priority,
  enabled: rule.enabled,
});

export class FirewallRuleService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
  ) {}

  async create(accountId: string, input: NewFirewallRule): Promise<FirewallRuleView> {
    const side = input.direction === 'inbound' ? 'sources' : 'destinations';
    const fields = checkShape({
      name: input.name,
      description: input.description ?? '',
      direction: input.direction,
      action: input.action,
      protocol: input.protocol,
      ports: input.ports ?? null,
      sources: input.sources ?? (side === 'sources' ? [...ANYWHERE] : []),
      destinations: input.destinations ?? (side === 'destinations' ? [...ANYWHERE] : []),
      priority: input.priority ?? DEFAULT_PRIORITY,
      targets: { instance_ids: input.targets?.instance_ids ?? [], tags: input.targets?.tags ?? {} },
      region: input.region,
      enabled: input.enabled ?? true,
    });
    const rule = await this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      await checkTargets(trx, accountId, fields);
      await this.quotas.ensureRoom(trx, accountId, 'firewall_rules', 1);
      const now = this.clock.now();
      const at = now.toISOString();
      const created: FirewallRule = {
        id: newId('firewallRule', now),
        account_id: accountId,
        ...fields,
        created_at: at,
        updated_at: at,
      };
      await rules.insertFirewallRule(trx, created);
      await recordCreated(trx, 'firewall_rule', created.id);
      await recordEvent(trx, this.clock, {
        accountId,
        type: 'firewall_rule.created',
        resourceId: created.id,
        data: eventData(created),
      });
      return created;
    });
    return view(rule);
  }

  async list(accountId: string, query: FirewallRuleListQuery): Promise<Page<FirewallRuleView>> {
    const db = this.store.db;
    let ids: string[] | undefined;
    if (query.instance_id !== undefined) {
      const instance = await findAccountInstance(db, accountId, query.instance_id);
      if (!instance) throw new NotFound('instance', query.instance_id, { field: 'instance_id' });
      ids = (await this.selecting(db, instance)).map((rule) => rule.id);
    }
    const page = await rules.listFirewallRules(
      db,
      accountId,
      {
        direction: query.direction,
        protocol: query.protocol,
        region: query.region,
        enabled: query.enabled,
        ids,
      },
      query,
    );
    return { items: page.items.map(view), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<FirewallRuleView> {
    const rule = await rules.findFirewallRule(this.store.db, accountId, id);
    if (!rule) throw new NotFound('firewall_rule', id);
    return view(rule);
  }

  /**
   * Fields not named keep their values, with two follow-ons: a new direction moves the rule to the other
   * address list (anywhere, unless the change gives it) and a change to icmp or all drops the ports.
   */
  async update(accountId: string, id: string, changes: FirewallRuleUpdate): Promise<FirewallRuleView> {
    const updated = await this.store.db.transaction().execute(async (trx) => {
      const current = await rules.lockFirewallRule(trx, accountId, id);
      if (!current) throw new NotFound('firewall_rule', id);
      const fields = checkShape(merge(current, changes));
      if (changes.targets !== undefined) await checkTargets(trx, accountId, fields);
      const written = await rules.updateFirewallRule(trx, id, {
        ...fields,
        updated_at: this.clock.now().toISOString(),
      });
      if (!written) throw new NotFound('firewall_rule', id);
      await recordEvent(trx, this.clock, {
        accountId,
        type: 'firewall_rule.updated',
        resourceId: id,
        data: {
          ...eventData(written),
          changed: Object.keys(changes).filter((k) => changes[k as keyof FirewallRuleUpdate] !== undefined),
        },
      });
      return written;
    });
    return view(updated);
  }

  async delete(accountId: string, id: string): Promise<FirewallRuleView> {
    const deleted = await this.store.db.transaction().execute(async (trx) => {
      const rule = await rules.deleteFirewallRule(trx, accountId, id);
      if (!rule) throw new NotFound('firewall_rule', id);
      await recordEvent(trx, this.clock, {
        accountId,
        type: 'firewall_rule.deleted',
        resourceId: id,
        data: eventData(rule),
      });
      return rule;
    });
    return view(deleted);
  }

  /** The account's rules whose region and targets select the instance, enabled or not. */
  async selecting(db: Executor, instance: Instance): Promise<FirewallRule[]> {
    const candidates = await rules.firewallRulesInRegion(db, instance.account_id, instance.region);
    return candidates.filter((rule) => selects(rule, instance));
  }
}

function merge(current: FirewallRule, changes: FirewallRuleUpdate): RuleFields {
  const direction = changes.direction ?? current.direction;
  const turned = direction !== current.direction;
  const protocol = changes.protocol ?? current.protocol;
  const portless = protocol === 'icmp' || protocol === 'all';
  const side = direction === 'inbound' ? 'sources' : 'destinations';
  const list = (name: 'sources' | 'destinations') =>
    changes[name] ?? (turned ? (name === side ? [...ANYWHERE] : []) : current[name]);
  return {
    name: changes.name ?? current.name,
    description: changes.description ?? current.description,
    direction,
    action: changes.action ?? current.action,
    protocol,
    ports: changes.ports !== undefined ? changes.ports : portless ? null : current.ports,
    sources: list('sources'),
    destinations: list('destinations'),
    priority: changes.priority ?? current.priority,
    targets:
      changes.targets !== undefined
        ? { instance_ids: changes.targets.instance_ids ?? [], tags: changes.targets.tags ?? {} }
        : current.targets,
    region: current.region,
    enabled: changes.enabled ?? current.enabled,
  };
}

/** The checks that need no store: ports against protocol, addresses against direction, CIDRs. */
function checkShape(fields: RuleFields): RuleFields {
  if (!isPrintableText(fields.description, MAX_DESCRIPTION_LENGTH)) {
    throw new InvalidRequest(
      `description is up to ${MAX_DESCRIPTION_LENGTH} printable characters (no control or invisible characters, no white space at either end)`,
      { field: 'description', value: fields.description },
    );
  }
  let ports: string | null = null;
  if (fields.protocol === 'tcp' || fields.protocol === 'udp') {
    if (fields.ports === null) {
      throw new InvalidRequest(`ports is required for ${fields.protocol} rules ("22" or "8000-8100")`, {
        field: 'ports',
        value: null,
      });
    }
    const problem = portsProblem(fields.ports);
    if (problem) throw new InvalidRequest(problem, { field: 'ports', value: fields.ports });
    ports = formatPorts(parsePorts(fields.ports));
  } else if (fields.ports !== null) {
    throw new InvalidRequest(`${fields.protocol} rules take no ports; leave ports out (or null)`, {
      field: 'ports',
      value: fields.ports,
    });
  }
  const [own, other] =
    fields.direction === 'inbound'
      ? (['sources', 'destinations'] as const)
      : (['destinations', 'sources'] as const);
  if (fields[other].length > 0) {
    throw new InvalidRequest(
      `${fields.direction} rules match the remote address by ${own}; ${other} is for ${fields.direction === 'inbound' ? 'outbound' : 'inbound'} rules`,
      { field: other, value: fields[other] },
    );
  }
  checkTagKeys(fields.targets.tags, 'targets.tags');
  return {
    ...fields,
    ports,
    [own]: normaliseBlocks(own, fields[own]),
    [other]: [],
    targets: { instance_ids: [...new Set(fields.targets.instance_ids)], tags: fields.targets.tags },
  } as RuleFields;
}

/** Each block parsed and printed canonically (a bare address becomes /32 or /128), duplicates dropped. */
function normaliseBlocks(field: string, blocks: readonly string[]): string[] {
  const out: string[] = [];
  blocks.forEach((text, index) => {
    let canonical: string;
    try {
      canonical = formatCidr(parseCidrBlock(text));
    } catch (error) {
      if (!(error instanceof CidrError)) throw error;
      throw new InvalidRequest(`${field}.${index}: ${error.message}`, {
        field: `${field}.${index}`,
        value: text,
        ...(error.suggestion ? { suggestion: error.suggestion } : {}),
      });
    }
    if (!out.includes(canonical)) out.push(canonical);
  });
  return out;
}

/** Target instances are the account's (else 404 naming the field) and in the rule's region (else 400). */
async function checkTargets(db: Executor, accountId: string, fields: RuleFields): Promise<void> {
  for (const [index, id] of fields.targets.instance_ids.entries()) {
    const instance = await findAccountInstance(db, accountId, id);
    if (!instance) throw new NotFound('instance', id, { field: 'targets.instance_ids' });
    if (instance.region !== fields.region) {
      throw new InvalidRequest(
        `Instance ${id} is in ${instance.region}; a rule in ${fields.region} can only target instances there`,
        {
          field: `targets.instance_ids.${index}`,
          value: id,
          instance_region: instance.region,
          region: fields.region,
        },
      );
    }
  }
}
