/**
 * Addresses: the pools instances, VPN gateways and public IPs take their addresses from. It serves no
 * routes of its own (each address is shown on what holds it), so the list names only its migrations.
 */
import { defineResource } from '../../platform/module.js';
import { ADDRESS_MIGRATIONS } from './migrations/index.js';

/** The resource as src/resources.ts lists it. */
export const ADDRESSES_RESOURCE = defineResource({
  name: 'addresses',
  migrations: ADDRESS_MIGRATIONS,
});
