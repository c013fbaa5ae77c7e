/**
 * The catalogue at run time, from the resources' declared parts: their order kept (the API lists
 * types in it), families derived, and a type two parts declare refused.
 */
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { EVENT_CATALOGUE } from '../../resources.js';
import { entry, eventCatalogue } from './catalog.js';

const data = Type.Object({ thing_id: Type.String() });

describe('eventCatalogue', () => {
  it('keeps the parts in order, with their families', () => {
    const catalogue = eventCatalogue(
      { 'thing.created': entry('made', data), 'thing.deleted': entry('gone', data) },
      { 'other.done': entry('done', data) },
    );
    expect(catalogue.types).toEqual(['thing.created', 'thing.deleted', 'other.done']);
    expect(catalogue.families).toEqual(['thing', 'other']);
    expect(catalogue.isEventType('thing.created')).toBe(true);
    expect(catalogue.isEventType('thing.made')).toBe(false);
    expect(catalogue.isEventType('toString')).toBe(false);
  });

  it('refuses a type two parts declare', () => {
    expect(() =>
      eventCatalogue({ 'thing.created': entry('a', data) }, { 'thing.created': entry('b', data) }),
    ).toThrow('Event type thing.created is declared twice');
  });

  it("holds every resource's types, instances first as the API has always listed them", () => {
    expect(EVENT_CATALOGUE.types[0]).toBe('instance.created');
    expect(EVENT_CATALOGUE.families).toEqual([
      'instance',
      'volume',
      'snapshot',
      'firewall_rule',
      'vpn',
      'public_ip',
      'invoice',
      'api_key',
      'ssh_key',
      'webhook',
      'alert',
    ]);
  });
});
