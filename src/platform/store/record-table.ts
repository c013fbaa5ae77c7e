/**
 * A table that holds one kind of record, declared once as a TypeBox object (the resource's record.ts).
 * From the record, the table's name and how the fields that are not plain columns are kept (JSON text,
 * 0/1 integers), `recordTable` gives what every such store wrote by hand: the column list, rows decoded
 * into records and changes encoded into columns, and the versioned reads and writes the lifecycle core
 * asks of a kind (find, findOwned, lock, insert, update and delete, the last two guarded on `version`).
 *
 * The row type stays in platform/store/schema.ts, the one schema of both engines; the record is checked
 * against it when it compiles: a column without a field, a field without a column, or a field that is
 * not a plain column and has no codec is a type error naming the fields (see `ColumnsMatch`).
 */
import type { Static, TObject } from '@sinclair/typebox';
import type { Kysely, Selectable } from 'kysely';
import { columnsShape, compiledOnce, compiledPerShape } from './compiled-query.js';
import { isPostgres } from './dialect.js';
import type { Database, Executor } from './schema.js';

/** How a field of the record is kept in its column. */
export interface ColumnCodec<Field, Column> {
  encode(field: Field): Column;
  decode(column: Column): Field;
}

/** An object or array kept as JSON text. */
export function jsonText<Field>(): ColumnCodec<Field, string> {
  return { encode: (field) => JSON.stringify(field), decode: (column) => JSON.parse(column) as Field };
}

/** An object kept as JSON text, or null. */
export function nullableJsonText<Field>(): ColumnCodec<Field | null, string | null> {
  return {
    encode: (field) => (field === null ? null : JSON.stringify(field)),
    decode: (column) => (column ? (JSON.parse(column) as Field) : null),
  };
}

/** A boolean kept as 0/1 (SQLite has no boolean, and both engines keep one schema). */
export const booleanInteger: ColumnCodec<boolean, number> = {
  encode: (field) => (field ? 1 : 0),
  decode: (column) => column === 1,
};

/**
 * A number, whichever way the driver hands its column back (PostgreSQL's bigint comes back as text; a
 * double precision is read through Number too, as the hand-written decoders did).
 */
export const numberColumn: ColumnCodec<number, number> = {
  encode: (field) => field,
  decode: (column) => Number(column),
};

/** A number or null, as `numberColumn`. */
export const nullableNumberColumn: ColumnCodec<number | null, number | null> = {
  encode: (field) => field,
  decode: (column) => (column === null ? null : Number(column)),
};

/** A string union (a status, a kind) widened to string, as its column holds it; null kept. */
type ColumnOfField<Field> = Field extends string ? string : Field;

/**
 * The row a record is kept as: each field with a codec as its codec's column, every other field as
 * itself. A resource declares its table with it and adds the table to `Database` by augmentation, so
 * the record stays the only declaration of its columns:
 *
 *   export type VolumesTable = RowFor<Volume, typeof codecs>;
 *   declare module '../../platform/store/schema.js' { interface Database { volumes: VolumesTable } }
 */
export type RowFor<Rec, C> = {
  [K in keyof Rec]: K extends keyof C
    ? C[K] extends ColumnCodec<Rec[K], infer Column>
      ? Column
      : never
    : ColumnOfField<Rec[K]>;
};

/** What every versioned record has: an id, its account, and the version writers guard on. */
export interface VersionedRecord {
  id: string;
  account_id: string;
  version: number;
}

/** The tables whose rows are versioned records. */
export type RecordTableName = {
  [N in keyof Database]: Selectable<Database[N]> extends VersionedRecord ? N : never;
}[keyof Database];

export type RowOf<N extends keyof Database> = Selectable<Database[N]>;

/** The fields whose record type is not its column's: they cannot be stored without a codec. */
type CodedFields<Rec, Row> = {
  [K in keyof Rec & keyof Row]: Rec[K] extends Row[K] ? never : K;
}[keyof Rec & keyof Row];

/** A codec for each field that needs one; any other field may have one too. */
export type Codecs<Rec, Row> = {
  [K in CodedFields<Rec, Row>]: ColumnCodec<Rec[K], Row[K]>;
} & {
  [K in Exclude<keyof Rec & keyof Row, CodedFields<Rec, Row>>]?: ColumnCodec<Rec[K], Row[K]>;
};

/**
 * Nothing when the record's fields are exactly the table's columns; otherwise a property the caller
 * cannot give, whose name says what is wrong and whose type names the fields.
 */
export type ColumnsMatch<Rec, Row> = [Exclude<keyof Rec, keyof Row>] extends [never]
  ? [Exclude<keyof Row, keyof Rec>] extends [never]
    ? unknown
    : { columnsWithoutAField: Exclude<keyof Row, keyof Rec> }
  : { fieldsWithoutAColumn: Exclude<keyof Rec, keyof Row> };

/** How the rows of a table are the records of a schema, both ways. */
export interface RecordRows<Rec, Row> {
  readonly table: string;
  /** Every column, in the record's order. */
  readonly columns: readonly (keyof Row & string)[];
  decode(row: Row): Rec;
  /** The columns `changes` sets (undefined fields are left out, as Kysely's `set()` leaves them). */
  encode(changes: Partial<Rec>): Partial<Row>;
}

export interface RecordTable<Rec, Row> extends RecordRows<Rec, Row> {
  insert(db: Executor, record: Rec): Promise<void>;
  find(db: Executor, id: string): Promise<Rec | undefined>;
  /** The account's record, or undefined: another account's id reads as missing. */
  findOwned(db: Executor, accountId: string, id: string): Promise<Rec | undefined>;
  /**
   * The account's record, held until the transaction ends (a row lock on PostgreSQL; SQLite runs one
   * write transaction at a time), so of two requests on one record the second sees the first.
   */
  lock(db: Executor, accountId: string, id: string): Promise<Rec | undefined>;
  /** Applies `changes` and bumps the version if the record is still at the version read; undefined when another writer won. */
  update(db: Executor, current: Rec, changes: Partial<Rec>): Promise<Rec | undefined>;
  /** Deletes the row if it is still at the version read; false otherwise. */
  delete(db: Executor, current: Rec): Promise<boolean>;
}

// biome-ignore lint/suspicious/noExplicitAny: the table is named at run time; the record's type is checked against it at the call
type AnyDb = Kysely<any>;
type Values = Record<string, unknown>;

/** The rows of `table` as records `record`, for a table whose writes are not versioned (a VPN's peers). */
export function recordRows<N extends keyof Database, S extends TObject>(
  spec: { table: N; record: S; codecs: Codecs<Static<S>, RowOf<N>> } & ColumnsMatch<Static<S>, RowOf<N>>,
): RecordRows<Static<S>, RowOf<N>> {
  type Rec = Static<S>;
  type Row = RowOf<N>;
  const coded = Object.entries(spec.codecs as Record<string, ColumnCodec<unknown, unknown>>);
  return {
    table: spec.table,
    columns: Object.keys(spec.record.properties) as (keyof Row & string)[],
    decode(row: Row): Rec {
      const record: Values = { ...row };
      for (const [field, codec] of coded) record[field] = codec.decode(record[field]);
      return record as Rec;
    },
    encode(changes: Partial<Rec>): Partial<Row> {
      const row: Values = { ...changes };
      for (const [field, codec] of coded) {
        if (row[field] !== undefined) row[field] = codec.encode(row[field]);
      }
      return row as Partial<Row>;
    },
  };
}

/**
 * The store of records `record` in table `table`. Every statement is compiled once per engine
 * (platform/store/compiled-query.ts): inserts and reads by id sit on the write path of every create and
 * boot step, and an update is one compiled statement per set of columns it writes.
 */
export function recordTable<N extends RecordTableName, S extends TObject>(
  spec: { table: N; record: S; codecs: Codecs<Static<S>, RowOf<N>> } & ColumnsMatch<Static<S>, RowOf<N>>,
): RecordTable<Static<S>, RowOf<N>> {
  type Row = RowOf<N>;
  const rows = recordRows<N, S>(spec);
  const { table, columns, decode, encode } = rows;

  const inserted = compiledOnce<Database, Values, never>((db, p) =>
    (db as AnyDb).insertInto(table).values(Object.fromEntries(columns.map((column) => [column, p[column]]))),
  );
  const byId = compiledOnce<Database, { id: string }, Row>((db, p) =>
    (db as AnyDb).selectFrom(table).selectAll().where('id', '=', p.id),
  );
  const owned = compiledOnce<Database, { accountId: string; id: string }, Row>((db, p) =>
    (db as AnyDb).selectFrom(table).selectAll().where('id', '=', p.id).where('account_id', '=', p.accountId),
  );
  const held = compiledOnce<Database, { accountId: string; id: string }, Row>((db, p) => {
    const query = (db as AnyDb)
      .selectFrom(table)
      .selectAll()
      .where('id', '=', p.id)
      .where('account_id', '=', p.accountId);
    return isPostgres(db) ? query.forUpdate() : query;
  });
  // The guard's values are named apart from the columns, which the shape names.
  const guardedUpdate = compiledPerShape<Database, Values, Row>(
    (shape) => (db, p) =>
      (db as AnyDb)
        .updateTable(table)
        .set(Object.fromEntries(shape.split(',').map((column) => [column, p[column]])))
        .where('id', '=', p.guard_id)
        .where('version', '=', p.guard_version)
        .returningAll(),
  );
  const guardedDelete = compiledOnce<Database, { id: string; version: number }, never>((db, p) =>
    (db as AnyDb).deleteFrom(table).where('id', '=', p.id).where('version', '=', p.version),
  );

  return {
    ...rows,
    async insert(db, record) {
      const row = encode(record) as Values;
      // A field the record leaves out is null, as Kysely's insert of the record left it (the SQL is fixed).
      for (const column of columns) row[column] ??= null;
      // Nobody reads what an insert answers (a new id cannot collide): written behind on PostgreSQL.
      await inserted.write(db, row);
    },
    async find(db, id) {
      const row = await byId.executeTakeFirst(db, { id });
      return row && decode(row);
    },
    async findOwned(db, accountId, id) {
      const row = await owned.executeTakeFirst(db, { accountId, id });
      return row && decode(row);
    },
    async lock(db, accountId, id) {
      const row = await held.executeTakeFirst(db, { accountId, id });
      return row && decode(row);
    },
    async update(db, record, changes) {
      const current = record as unknown as VersionedRecord;
      const set = { ...(encode(changes) as Values), version: current.version + 1 };
      const row = await guardedUpdate(columnsShape(set)).executeTakeFirst(db, {
        ...set,
        guard_id: current.id,
        guard_version: current.version,
      });
      return row && decode(row);
    },
    async delete(db, record) {
      const current = record as unknown as VersionedRecord;
      const deleted = await guardedDelete.run(db, { id: current.id, version: current.version });
      return (deleted.numAffectedRows ?? 0n) > 0n;
    },
  };
}
