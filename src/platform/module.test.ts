/**
 * The one list of resources and what is derived from it: the modules come out in the list's order, each
 * named by its definition and made from what the root handed it by that name; a resource without a
 * module (one that only lends parts to others) makes none.
 */
import { describe, expect, it } from 'vitest';
import { defineResource, modulesOf } from './module.js';

const first = defineResource({
  name: 'first',
  module: (needs: { port: number }) => ({ operatorMetrics: () => `port ${needs.port}` }),
});
const partsOnly = defineResource({ name: 'parts-only', migrations: {} });
const second = defineResource({ name: 'second', module: () => ({}) });

describe('modulesOf', () => {
  it("makes each listed resource's module in list order, named by its definition", () => {
    const modules = modulesOf([second, partsOnly, first] as const, { first: { port: 53 }, second: {} });
    expect(modules.map((module) => module.name)).toEqual(['second', 'first']);
    expect(modules[1]?.operatorMetrics?.()).toBe('port 53');
  });

  it('asks the type check for every resource with a module, by name (tsc checks it: npm run typecheck)', () => {
    // @ts-expect-error `second` is listed and has a module, so it must be given what the module takes.
    const modules = modulesOf([first, second] as const, { first: { port: 1 } });
    // Nothing is refused at run time: the type check above is the guard.
    expect(modules.map((module) => module.name)).toEqual(['first', 'second']);
  });
});
