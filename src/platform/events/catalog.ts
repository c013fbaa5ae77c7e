/**
 * The event catalogue's mechanism: the entry of one type (what it means, and the TypeBox shape of its
 * `data`), the type-level catalogue, and the catalogue at run time (docs/design.md, "Events and webhooks").
 *
 * The types themselves are the resources': each declares its own in its `events.ts`, with data derived
 * from its record (Pick) where the record has the field, and adds them to `EventCatalog` by module
 * augmentation, as its tables are added to `Database`; so the outbox writer (platform/events/outbox.ts)
 * takes only declared types, each with its own data, and a misspelt type or a missing field is a compile
 * error. The one list of resources (src/resources.ts) puts their parts together (`eventCatalogue`), and
 * `GET /v1/events` filters and webhook subscriptions take their allowed values from that.
 */
import type { Static, TObject } from '@sinclair/typebox';

/** One event type: what it means, and the schema of its `data`. */
export interface EventEntry<Data extends TObject = TObject> {
  description: string;
  data: Data;
}

export const entry = <T extends TObject>(description: string, data: T): EventEntry<T> => ({
  description,
  data,
});

/**
 * Every event type, by name, with its entry: empty here, filled by the resources, each with
 * `declare module '…/platform/events/catalog.js' { interface EventCatalog extends MyEvents {} }`.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled by module augmentation
export interface EventCatalog {}

export type EventType = keyof EventCatalog & string;
export type EventData<T extends EventType> = Static<EventCatalog[T]['data']>;

/** The catalogue at run time: the entries in the order the parts are given. */
export interface EventCatalogue {
  readonly entries: Readonly<Record<EventType, EventEntry>>;
  readonly types: readonly EventType[];
  /** The families (`instance`, `volume`…) the catalogue has, for `instance.*`-style filters. */
  readonly families: readonly string[];
  isEventType(type: string): type is EventType;
}

/** One catalogue from the resources' parts; a type declared twice is refused. */
export function eventCatalogue(...parts: readonly Readonly<Record<string, EventEntry>>[]): EventCatalogue {
  const entries: Record<string, EventEntry> = {};
  for (const part of parts) {
    for (const [type, declared] of Object.entries(part)) {
      if (Object.hasOwn(entries, type)) throw new Error(`Event type ${type} is declared twice`);
      entries[type] = declared;
    }
  }
  const names = Object.keys(entries);
  return {
    entries: entries as Record<EventType, EventEntry>,
    types: names as EventType[],
    families: [...new Set(names.map((type) => type.slice(0, type.indexOf('.'))))],
    isEventType: (type: string): type is EventType => Object.hasOwn(entries, type),
  };
}
