/**
 * Public IP events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { Nullable } from '../../platform/http/schemas.js';
import { PublicIpRecord } from './record.js';

const PublicIpEvent = Type.Object(
  {
    public_ip_id: Type.String({ description: 'The public IP' }),
    ...Type.Pick(PublicIpRecord, ['name', 'address', 'region']).properties,
    instance_id: Nullable(
      Type.String({
        description: 'The instance it is assigned to (public_ip.unassigned: the one it left; null: none)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const PUBLIC_IP_EVENTS = {
  'public_ip.created': entry('A public IP was allocated (or made with an instance)', PublicIpEvent),
  'public_ip.assigned': entry('A public IP was assigned to an instance', PublicIpEvent),
  'public_ip.unassigned': entry('A public IP left its instance', PublicIpEvent),
  'public_ip.deleted': entry('A public IP was released', PublicIpEvent),
};

type PublicIpEvents = typeof PUBLIC_IP_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends PublicIpEvents {}
}
