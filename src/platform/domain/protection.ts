/**
 * Deletion protection (issue 35): a flag on instances, volumes and public IPs that refuses their delete,
 * and the deletes that would take them along, until the user turns it off. One declaration for the three
 * records, so their API fields, columns and refusals read alike.
 */
import { type Static, Type } from '@sinclair/typebox';
import { Conflict } from '../errors.js';

export const Protection = Type.Object(
  {
    delete: Type.Boolean({
      description: 'While true, a DELETE is refused (409 `conflict`) until a PATCH turns it off',
    }),
  },
  {
    description: 'Guards against mistakes: `{delete: true}` refuses deleting it',
    additionalProperties: false,
  },
);
export type Protection = Static<typeof Protection>;

/** What a resource is made with when the request says nothing. */
export const UNPROTECTED: Protection = { delete: false };

/** The `details.reason` of a protected delete, for clients that branch on it. */
export const DELETE_PROTECTED = 'delete_protected';

/** A resource as the refusal names it: `label` as messages say it ("Public IP"), `path` its collection. */
export interface Protected {
  label: string;
  resource: string;
  id: string;
  path: string;
}

/**
 * The 409 of deleting a protected resource: it names the flag and the PATCH that lifts it. `by`: the
 * resource whose delete was asked for, when the protected one would only have gone along with it.
 */
export function deleteProtected(guarded: Protected, by?: { label: string; id: string }): Conflict {
  const what = `${guarded.label} ${guarded.id}`;
  const prefix = by ? `${by.label} ${by.id} cannot be deleted: it would delete ${what}, whose ` : `${what}: `;
  return new Conflict(
    `${prefix}protection.delete is on; turn it off with PATCH ${guarded.path}/${guarded.id} first`,
    { reason: DELETE_PROTECTED, field: 'protection.delete', resource: guarded.resource, id: guarded.id },
  );
}
