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

export async function readSetting(db: Executor, key: string): Promise<string | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row?.value;
}
