/**
 * What the API shows of a record is its view schema, derived from the record's own (`Type.Omit` of the
 * fields that stay in the server): `viewOf(schema)` copies those fields from a record, so the schema is
 * the one list of what leaves the server and the mapper cannot drift from it.
 */
import type { Static, TObject } from '@sinclair/typebox';

/** A function that copies from a record the fields `schema` names (a field the record lacks stays out). */
export function viewOf<S extends TObject>(schema: S): (record: Static<S>) => Static<S> {
  const fields = Object.keys(schema.properties);
  return (record) => {
    const view: Record<string, unknown> = {};
    for (const field of fields) {
      if (field in record) view[field] = (record as Record<string, unknown>)[field];
    }
    return view as Static<S>;
  };
}
