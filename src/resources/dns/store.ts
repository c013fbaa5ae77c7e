/**
 * What the DNS server reads of the instances table, one indexed statement per question so an answer is
 * never older than the last commit: by id (the primary key), by region and name (`instances_region_name`,
 * migration 0019), and by region and public address (the `instances_public_ip` unique constraint).
 *
 * An instance being deleted answers nothing: its address is on its way back to the pool.
 */
import type { Kysely } from 'kysely';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import type { Database } from '../../platform/store/schema.js';

/** An instance as DNS names it: where it is and the public address it holds now (null: none). */
export interface NamedInstance {
  id: string;
  region: string;
  public_ip: string | null;
}

const DELETING = 'deleting';

const byId = compiledOnce((db: Kysely<Database>, p: { id: string }) =>
  db
    .selectFrom('instances')
    .select(['id', 'region', 'public_ip'])
    .where('id', '=', p.id)
    .where('status', '!=', DELETING),
);

// Two rows are enough to know a name is not unique.
const byName = compiledOnce((db: Kysely<Database>, p: { region: string; name: string }) =>
  db
    .selectFrom('instances')
    .select(['id', 'region', 'public_ip'])
    .where('region', '=', p.region)
    .where('name', '=', p.name)
    .where('status', '!=', DELETING)
    .limit(2),
);

const byAddress = compiledOnce((db: Kysely<Database>, p: { region: string; address: string }) =>
  db
    .selectFrom('instances')
    .select(['id', 'region', 'public_ip'])
    .where('region', '=', p.region)
    .where('public_ip', '=', p.address)
    .where('status', '!=', DELETING),
);

function named(row: { id: string; region: string; public_ip: string | null } | undefined) {
  if (!row) return null;
  // An instance made without a public address may keep an empty column rather than NULL.
  return { id: row.id, region: row.region, public_ip: row.public_ip || null };
}

export async function instanceById(db: Kysely<Database>, region: string, id: string) {
  const found = named(await byId.executeTakeFirst(db, { id }));
  return found?.region === region ? found : null;
}

/**
 * The instance of the region with this name, when it is the only one of any account there: names are
 * unique per account, and a name two accounts use belongs to neither (docs/api.md, "DNS").
 */
export async function instanceByUniqueName(db: Kysely<Database>, region: string, name: string) {
  const rows = await byName.execute(db, { region, name });
  return rows.length === 1 ? named(rows[0]) : null;
}

export async function instanceByAddress(db: Kysely<Database>, regions: readonly string[], address: string) {
  for (const region of regions) {
    const found = named(await byAddress.executeTakeFirst(db, { region, address }));
    if (found) return found;
  }
  return null;
}
