/**
 * What the API shows of a record is its view schema, derived from the record's own schema (its fields
 * less those that stay in the server, plus what the view computes): `viewOf(schema)` copies from a record
 * the fields the view names, so the schema is the one list of what leaves the server and the mapper
 * cannot drift from it.
 */
import type { Static, TObject } from '@sinclair/typebox';

/**
 * A function that copies from a record the fields `schema` names and the record has. When the view is
 * the record less some fields that is the whole view; a view that also computes fields adds them to it.
 */
export function viewOf<S extends TObject>(
  schema: S,
): <R extends object>(record: R) => Pick<Static<S>, keyof Static<S> & keyof R> {
  const fields = Object.keys(schema.properties);
  return (record) => {
    const view: Record<string, unknown> = {};
    for (const field of fields) {
      if (field in record) view[field] = (record as Record<string, unknown>)[field];
    }
    return view as Pick<Static<S>, keyof Static<S> & keyof typeof record>;
  };
}
