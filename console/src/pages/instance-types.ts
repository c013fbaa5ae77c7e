/** The instance-type catalogue (GET /v1/instance-types), for the create form and the resize dialog. */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { unwrap } from '../api.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';

type CreateBody = paths['/v1/instances']['post']['requestBody']['content']['application/json'];
export type InstanceTypeName = CreateBody['instance_type'];
export type RegionName = CreateBody['region'];
export type ImageName = CreateBody['image'];

export function useInstanceTypes(region: string) {
  return useLoad(async () => {
    const answer = await unwrap(
      currentSession().api.GET('/v1/instance-types', {
        params: { query: { limit: 100, sort: 'price_per_hour', region: region as RegionName } },
      }),
    );
    return answer.data;
  }, [region]);
}
