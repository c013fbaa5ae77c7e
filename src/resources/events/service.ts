/**
 * Reading the account's event log: the rows the transactional outbox (platform/events/outbox.ts) wrote with each
 * change, so users see events before, and besides, webhooks. Events are shown in the webhook payload's
 * shape without the signature, with their `actor` beside `data` (a delivery carries it in `data`).
 */

import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import type { Actor } from '../../platform/events/actor.js';
import type { EventCatalogue } from '../../platform/events/catalog.js';
import * as events from '../../platform/events/store.js';
import type { Store } from '../../platform/store/db.js';

export interface EventView {
  id: string;
  type: string;
  /** When the change happened: the row's created_at. */
  timestamp: string;
  resource_id: string;
  data: Record<string, unknown>;
  actor: Actor;
}

export interface EventQuery {
  /** An exact type, or `<prefix>.*` for every type starting with `<prefix>.` (the route checks the form). */
  type?: string | undefined;
  resource_id?: string | undefined;
  /** ISO 8601 date-time; events created at or after it. */
  since?: string | undefined;
  actor_type?: Actor['type'] | undefined;
  /** An API key's id. */
  actor_id?: string | undefined;
}

function view(row: events.StoredEvent): EventView {
  return {
    id: row.id,
    type: row.type,
    timestamp: row.created_at,
    resource_id: row.resource_id,
    data: row.data,
    actor: row.actor,
  };
}

/**
 * `since` as stored timestamps are written (UTC, `toISOString`), so comparing the text compares times.
 * That holds for four-digit years only: an offset can push a valid date-time outside them.
 */
function sinceText(since: string): string {
  const at = new Date(since);
  const year = at.getUTCFullYear();
  // Number.isNaN: the schema's date-time format admits a leap second (23:59:60), which Date does not.
  if (Number.isNaN(at.getTime()) || year < 0 || year > 9999) {
    throw new InvalidRequest('since must be an ISO 8601 date-time between the years 0000 and 9999 UTC', {
      field: 'since',
      value: since,
    });
  }
  return at.toISOString();
}

/** A type of the catalogue, or a family of them (`instance.*`). */
function checkTypeFilter(catalogue: EventCatalogue, type: string): void {
  const family = type.endsWith('.*') ? type.slice(0, -2) : null;
  if (family === null ? catalogue.isEventType(type) : catalogue.families.includes(family)) return;
  throw new InvalidRequest(`Unknown event type ${type}`, {
    field: 'type',
    value: type,
    allowed_values: [...catalogue.types, ...catalogue.families.map((f) => `${f}.*`)],
  });
}

export class EventService {
  constructor(
    readonly store: Store,
    private readonly catalogue: EventCatalogue,
  ) {}

  async list(accountId: string, query: EventQuery, request: PageRequest): Promise<Page<EventView>> {
    if (query.type !== undefined) checkTypeFilter(this.catalogue, query.type);
    // 'instance.*' → the prefix 'instance.'
    const prefix = query.type?.endsWith('.*') ? query.type.slice(0, -1) : undefined;
    const page = await events.listEvents(
      this.store.db,
      accountId,
      {
        type: prefix === undefined ? query.type : undefined,
        typePrefix: prefix,
        resourceId: query.resource_id,
        since: query.since === undefined ? undefined : sinceText(query.since),
        actorType: query.actor_type,
        actorId: query.actor_id,
      },
      request,
    );
    return { items: page.items.map(view), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<EventView> {
    const row = await events.findEvent(this.store.db, accountId, id);
    if (!row) throw new NotFound('event', id);
    return view(row);
  }
}
