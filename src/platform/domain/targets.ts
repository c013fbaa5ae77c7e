/**
 * What a firewall rule or an alert policy applies to: instances named by id, and instances carrying
 * tags. Declared once for both records, with the two columns both stores keep it in.
 */
import { type Static, Type } from '@sinclair/typebox';

export const Targets = Type.Object({
  instance_ids: Type.Array(Type.String()),
  tags: Type.Record(Type.String(), Type.String()),
});
export type Targets = Static<typeof Targets>;

/** How a store keeps targets: one column per part. */
export interface TargetColumns {
  target_instance_ids: Targets['instance_ids'];
  target_tags: Targets['tags'];
}

export const targetColumns = (targets: Targets): TargetColumns => ({
  target_instance_ids: targets.instance_ids,
  target_tags: targets.tags,
});

export const targetsOf = (columns: TargetColumns): Targets => ({
  instance_ids: columns.target_instance_ids,
  tags: columns.target_tags,
});
