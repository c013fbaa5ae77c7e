/**
 * Public IPv4 addresses of a region: instances hold most of them, VPN gateways the rest, and no address is
 * ever held twice. Whoever allocates reads both tables through `publicIpsInUse` inside the transaction that
 * then writes the chosen address. On PostgreSQL that read first takes a transaction-scoped advisory lock
 * per region, so two allocations in one region (an instance's and a gateway's, of any accounts) take
 * turns instead of both picking the same free address; SQLite runs one write transaction at a time anyway.
 * The unique constraints of each table stay as the last guard.
 */
import { sql } from 'kysely';
import { isPostgres } from './dialect.js';
import type { Executor } from './schema.js';

export async function publicIpsInUse(db: Executor, region: string): Promise<string[]> {
  if (isPostgres(db)) {
    await sql`select pg_advisory_xact_lock(hashtext(${`nimbus:public-ip:${region}`}))`.execute(db);
  }
  const rows = await db
    .selectFrom('instances')
    .select('public_ip as ip')
    .where('region', '=', region)
    .unionAll(db.selectFrom('vpns').select('endpoint_ip as ip').where('region', '=', region))
    .execute();
  return rows.map((row) => row.ip);
}
