/**
 * The snapshot edit dialog's logic apart from its markup: a snapshot as the form shows it (tags as one
 * line) and the PATCH body of only the fields the user changed (PATCH /v1/snapshots/{id} takes the name
 * and the tags; new tags replace the old ones whole).
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import type { Schemas } from '../api.ts';
import { formatTags, parseTags } from '../tags.ts';

export type SnapshotPatch =
  paths['/v1/snapshots/{id}']['patch']['requestBody']['content']['application/json'];

export interface SnapshotDraft {
  name: string;
  tags: string;
}

export function snapshotDraftOf(snapshot: Schemas['Snapshot']): SnapshotDraft {
  return { name: snapshot.name, tags: formatTags(snapshot.tags) };
}

export function snapshotPatch(before: SnapshotDraft, after: SnapshotDraft): SnapshotPatch {
  const body: SnapshotPatch = {};
  if (after.name !== before.name) body.name = after.name;
  if (after.tags !== before.tags) body.tags = parseTags(after.tags);
  return body;
}
