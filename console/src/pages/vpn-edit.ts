/**
 * The VPN edit dialog's logic apart from its markup: a VPN as the form shows it (its extra routes as one
 * line) and the PATCH body of only the fields the user changed (PATCH /v1/vpn/{id} takes the name and
 * allowed_cidrs; an emptied routes field removes every extra route).
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import type { Schemas } from '../api.ts';

export type VpnPatch = paths['/v1/vpn/{id}']['patch']['requestBody']['content']['application/json'];

export interface VpnDraft {
  name: string;
  allowed: string;
}

/** CIDR blocks separated by commas or blanks, as the create and edit forms take them. */
export function cidrList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((block) => block.trim())
    .filter(Boolean);
}

export function vpnDraftOf(vpn: Schemas['Vpn']): VpnDraft {
  return { name: vpn.name, allowed: vpn.allowed_cidrs.join(', ') };
}

export function vpnPatch(before: VpnDraft, after: VpnDraft): VpnPatch {
  const body: VpnPatch = {};
  if (after.name !== before.name) body.name = after.name;
  // Compared as lists: retyping the same blocks with other separators changes nothing.
  const blocks = cidrList(after.allowed);
  if (blocks.join(',') !== cidrList(before.allowed).join(',')) body.allowed_cidrs = blocks;
  return body;
}
