/**
 * Address allocation by index probes. A scope (a region's public pool, which instances and VPN gateways
 * share; an account's private network in a region) keeps `next_ip`, the first address of its block never
 * handed out, and `free_addresses`, the ones below it that nobody holds. Every address of the block below
 * `next_ip` is either held by a row (an instance's, a gateway's) or free, so "the lowest free address" is
 * the lowest free row, or `next_ip` when there is none: what the old scan of every address in use found,
 * at the cost of one index probe.
 *
 * A scope is set up on its first allocation from the rows in use then (the pool is configuration, known
 * only at run time), and again if its pool is configured differently since.
 *
 * Concurrency. SQLite runs one write transaction at a time. On PostgreSQL, creates in one region run in
 * parallel: a free address is taken with `FOR UPDATE SKIP LOCKED` (an address another transaction is
 * taking is skipped, and is free again if that transaction rolls back); before a create's transaction
 * `replenishAddresses` frees the next chunk of the block when none is free, in a short transaction of
 * its own. Only when a create still finds nothing free does it move `next_ip` itself, holding the pool
 * row until it commits. The unique constraints on the holders' address columns stay as the last guard.
 */
import { type Kysely, sql } from 'kysely';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import { isPostgres } from '../../platform/store/dialect.js';
import type { Database, Executor } from '../../platform/store/schema.js';
import { type Cidr, intToIp, ipToInt } from './addresses.js';

export interface AddressScope {
  key: string;
  block: Cidr;
  /** The scope's addresses held now; read only when the scope is set up. */
  inUse: (db: Executor) => Promise<string[]>;
}

export const publicScopeKey = (region: string) => `public:${region}`;
export const privateScopeKey = (accountId: string, region: string) => `private:${accountId}:${region}`;

/**
 * Addresses a PostgreSQL replenishment frees at once, and how few free ones make a create replenish
 * first: more than the creates that can be in flight at once on a scope (a pool of connections per
 * replica), so they take free rows with SKIP LOCKED instead of finding none and queueing on the pool
 * row (`handOutNext`).
 */
const POSTGRES_CHUNK = 256;
const POSTGRES_LOW_WATER = 128;

/** The lowest free address of the scope, taken in the caller's transaction; null when the block is full. */
export async function takeAddress(trx: Executor, scope: AddressScope): Promise<string | null> {
  const postgres = isPostgres(trx);
  const where = {
    scope: scope.key,
    cidr: scope.block.cidr,
    first: scope.block.first,
    last: scope.block.last,
  };
  if (postgres) {
    // The usual case on PostgreSQL, in one statement: set up for this pool, a free address (replenished).
    const free = await takeFreeWhenSetUp.executeTakeFirst(trx, where);
    if (free) return intToIp(Number(free.ip));
  } else {
    // The usual case on SQLite, in one statement: set up for this pool, nothing free below next_ip.
    const next = await nextWhenNoneFree.executeTakeFirst(trx, where);
    if (next) return intToIp(Number(next.next_ip) - 1);
  }
  await ensureScope(trx, scope);
  const free = await takeLowestFree(trx, scope, postgres);
  if (free !== null) return intToIp(free);
  const next = await handOutNext(trx, scope);
  if (next !== null) return intToIp(next);
  // PostgreSQL: a replenishment that freed the end of the block may have committed while this waited
  // for the pool row; its free addresses were not there for the first look, they are now.
  const late = postgres ? await takeLowestFree(trx, scope, postgres) : null;
  return late === null ? null : intToIp(late);
}

/**
 * PostgreSQL, before a create's transaction: when the scope has fewer than POSTGRES_LOW_WATER free
 * addresses, frees the next chunk of its block in a short transaction of its own, so the creates that
 * follow take addresses with SKIP LOCKED instead of queueing on the pool row (which `handOutNext` holds
 * until its transaction ends). Called outside any transaction: a create holding a connection while it
 * waits for a second one could starve the pool. Nothing to do on SQLite, or for a scope not set up yet.
 * Freeing a chunk early keeps "lowest free first": every address below `next_ip` is held or free. A
 * probe that found enough lets this process's next `PROBE_EVERY - 1` creates on the scope skip it.
 */
export async function replenishAddresses(root: Kysely<Database>, scope: AddressScope): Promise<void> {
  if (!isPostgres(root)) return;
  if (skipProbe(root, scope.key)) return;
  // One index probe: is there a free address at position LOW_WATER (in the scope's order)?
  const enough = await root
    .selectFrom('free_addresses')
    .select('ip')
    .where('scope', '=', scope.key)
    .where('ip', '>=', scope.block.first)
    .where('ip', '<=', scope.block.last)
    .orderBy('ip')
    .offset(POSTGRES_LOW_WATER - 1)
    .limit(1)
    .executeTakeFirst();
  if (enough) {
    probedPlenty(root, scope.key);
    return;
  }
  await root.transaction().execute(async (apart) => {
    const pool = await apart
      .selectFrom('address_pools')
      .select(['cidr', 'next_ip'])
      .where('scope', '=', scope.key)
      .forUpdate()
      .executeTakeFirst();
    if (pool?.cidr !== scope.block.cidr) return;
    const start = Number(pool.next_ip);
    const end = Math.min(start + POSTGRES_CHUNK, scope.block.last + 1);
    if (end <= start) return;
    await apart.updateTable('address_pools').set({ next_ip: end }).where('scope', '=', scope.key).execute();
    await apart
      .insertInto('free_addresses')
      .values(Array.from({ length: end - start }, (_, i) => ({ scope: scope.key, ip: start + i })))
      .execute();
  });
}

/**
 * Creates that may skip the probe after it found enough free: a probe is a round trip per scope, and a
 * create takes one address from each of its two scopes. A quarter of the low water, so even with four
 * replicas taking as many each meanwhile, the scope stays above zero free before the next probe.
 */
const PROBE_EVERY = POSTGRES_LOW_WATER / 4;

/** Per store handle, per scope: creates left before the next probe. */
const probesSkipped = new WeakMap<object, Map<string, number>>();

function skipProbe(root: object, scopeKey: string): boolean {
  const left = probesSkipped.get(root)?.get(scopeKey) ?? 0;
  if (left <= 0) return false;
  probesSkipped.get(root)?.set(scopeKey, left - 1);
  return true;
}

function probedPlenty(root: object, scopeKey: string): void {
  let byScope = probesSkipped.get(root);
  if (byScope === undefined) {
    byScope = new Map();
    probesSkipped.set(root, byScope);
  }
  byScope.set(scopeKey, PROBE_EVERY - 1);
}

/** Gives an address back to its scope (its holder's row is being deleted in this transaction). */
export async function returnAddress(db: Executor, scopeKey: string, ip: string): Promise<void> {
  const value = ipToInt(ip);
  const pool = await db
    .selectFrom('address_pools')
    .select('next_ip')
    .where('scope', '=', scopeKey)
    .executeTakeFirst();
  // Not set up yet (its set-up will see the row gone), or above what was handed out from this pool.
  if (!pool || value >= Number(pool.next_ip)) return;
  await db
    .insertInto('free_addresses')
    .values({ scope: scopeKey, ip: value })
    .onConflict((oc) => oc.columns(['scope', 'ip']).doNothing())
    .execute();
}

// The statements every allocation runs, compiled once (platform/store/compiled-query.ts).
const poolCidr = compiledOnce<Database, { scope: string }, { cidr: string }>((db, p) =>
  db.selectFrom('address_pools').select('cidr').where('scope', '=', p.scope),
);
const lowestFree = compiledOnce<Database, { scope: string; first: number; last: number }, { ip: number }>(
  (db, p) =>
    db
      .selectFrom('free_addresses')
      .select('ip')
      .where('scope', '=', p.scope)
      .where('ip', '>=', p.first)
      .where('ip', '<=', p.last)
      .orderBy('ip')
      .limit(1),
);
const deleteFree = compiledOnce<Database, { scope: string; ip: number }, never>((db, p) =>
  db.deleteFrom('free_addresses').where('scope', '=', p.scope).where('ip', '=', p.ip),
);
const nextInPool = compiledOnce<Database, { scope: string; last: number }, { next_ip: number }>((db, p) =>
  db
    .updateTable('address_pools')
    .set({ next_ip: sql<number>`next_ip + 1` })
    .where('scope', '=', p.scope)
    .where('next_ip', '<=', p.last)
    .returning('next_ip'),
);

/**
 * `handOutNext` for a scope set up for this pool whose free list is empty in the block (so `next_ip` is
 * the lowest free address): what `ensureScope`, `takeLowestFree` and `handOutNext` find then, in one
 * statement. No row: one of those conditions does not hold, and the caller takes the long way.
 */
const nextWhenNoneFree = compiledOnce<
  Database,
  { scope: string; cidr: string; first: number; last: number },
  { next_ip: number }
>((db, p) =>
  db
    .updateTable('address_pools')
    .set({ next_ip: sql<number>`next_ip + 1` })
    .where('scope', '=', p.scope)
    .where('cidr', '=', p.cidr)
    .where('next_ip', '<=', p.last)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('free_addresses')
            .select('ip')
            .where('scope', '=', p.scope)
            .where('ip', '>=', p.first)
            .where('ip', '<=', p.last),
        ),
      ),
    )
    .returning('next_ip'),
);

/**
 * PostgreSQL: `takeLowestFree` for a scope set up for this pool (what `ensureScope` checks first), in one
 * statement. No row: not set up for this pool, or nothing free. It is the first try of `takeAddress`, and
 * the take of `takeLowestFree` once `ensureScope` has set the scope up.
 */
const takeFreeWhenSetUp = compiledOnce<
  Database,
  { scope: string; cidr: string; first: number; last: number },
  { ip: number }
>((db, p) => {
  const statement = sql<{ ip: number }>`
    delete from free_addresses
    where scope = ${p.scope} and ip = (
      select ip from free_addresses
      where scope = ${p.scope} and ip between ${p.first} and ${p.last}
      order by ip limit 1
      for update skip locked
    )
    and exists (select 1 from address_pools where scope = ${p.scope} and cidr = ${p.cidr})
    returning ip`;
  return { compile: () => statement.compile(db) };
});

/** Sets the scope up from the rows in use unless it is already, for this pool; true if it did now. */
async function ensureScope(trx: Executor, scope: AddressScope): Promise<boolean> {
  const pool = await poolCidr.executeTakeFirst(trx, { scope: scope.key });
  if (pool?.cidr === scope.block.cidr) return false;
  if (isPostgres(trx)) {
    // Two first allocations at once must not both set the scope up.
    await sql`select pg_advisory_xact_lock(hashtext(${`nimbus:address-scope:${scope.key}`}))`.execute(trx);
    const again = await trx
      .selectFrom('address_pools')
      .select('cidr')
      .where('scope', '=', scope.key)
      .executeTakeFirst();
    if (again?.cidr === scope.block.cidr) return false;
  }
  const { first, last } = scope.block;
  const held = new Set(
    (await scope.inUse(trx)).map(ipToInt).filter((value) => value >= first && value <= last),
  );
  // A loop, not Math.max(...held): a scope set up over a large fleet holds hundreds of thousands of
  // addresses, more arguments than a call's stack takes.
  let highest = first - 1;
  for (const value of held) if (value > highest) highest = value;
  const next = highest + 1;
  const free: number[] = [];
  for (let value = first; value < next; value++) if (!held.has(value)) free.push(value);

  await trx.deleteFrom('free_addresses').where('scope', '=', scope.key).execute();
  for (let i = 0; i < free.length; i += 500) {
    await trx
      .insertInto('free_addresses')
      .values(free.slice(i, i + 500).map((ip) => ({ scope: scope.key, ip })))
      .execute();
  }
  await trx
    .insertInto('address_pools')
    .values({ scope: scope.key, cidr: scope.block.cidr, next_ip: next })
    .onConflict((oc) => oc.column('scope').doUpdateSet({ cidr: scope.block.cidr, next_ip: next }))
    .execute();
  return true;
}

async function takeLowestFree(trx: Executor, scope: AddressScope, postgres: boolean): Promise<number | null> {
  const { key, block } = scope;
  if (postgres) {
    // The scope is set up for this pool by now (ensureScope), so the one-statement take holds.
    const taken = await takeFreeWhenSetUp.executeTakeFirst(trx, {
      scope: key,
      cidr: block.cidr,
      first: block.first,
      last: block.last,
    });
    return taken ? Number(taken.ip) : null;
  }
  const lowest = await lowestFree.executeTakeFirst(trx, { scope: key, first: block.first, last: block.last });
  if (!lowest) return null;
  await deleteFree.run(trx, { scope: key, ip: lowest.ip });
  return Number(lowest.ip);
}

/** Moves next_ip one on, in the caller's transaction; the address it was, or null past the block. */
async function handOutNext(trx: Executor, scope: AddressScope): Promise<number | null> {
  const moved = await nextInPool.executeTakeFirst(trx, { scope: scope.key, last: scope.block.last });
  return moved ? Number(moved.next_ip) - 1 : null;
}
