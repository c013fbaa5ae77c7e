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

export async function findSetting(db: Executor, key: string): Promise<string | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row?.value;
}

/** Sets the setting to `to` only while it is `from`; true when this call changed it (one caller wins). */
export async function replaceSetting(db: Executor, key: string, from: string, to: string): Promise<boolean> {
  const result = await db
    .updateTable('settings')
    .set({ value: to })
    .where('key', '=', key)
    .where('value', '=', from)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
