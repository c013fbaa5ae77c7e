/** How a public IP looks to users: its record without what stays in the server (docs/api.md, Public IPs). */
import { type Static, Type } from '@sinclair/typebox';
import { viewOf } from '../../platform/http/view-of.js';
import { PublicIpRecord } from './record.js';

export const PublicIpView = Type.Object(Type.Omit(PublicIpRecord, ['account_id', 'version']).properties, {
  $id: 'PublicIp',
  title: 'PublicIp',
});
export type PublicIpView = Static<typeof PublicIpView>;
export const publicIpView = viewOf(PublicIpView);
