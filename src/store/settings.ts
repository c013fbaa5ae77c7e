import type { Executor } from './schema.js';

/** Inserts the setting unless it exists; true when this call wrote it (so exactly one caller wins). */
export async function claimSetting(db: Executor, key: string, value: string): Promise<boolean> {
  const result = await db
    .insertInto('settings')
    .values({ key, value })
    .onConflict((oc) => oc.column('key').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}
