/** The limits an instance's user-chosen fields must keep (docs/design.md, "Instance record"). */

export const USER_DATA_MAX_BYTES = 16 * 1024;
export const FIREWALL_PRESETS = ['ssh-only', 'web', 'allow-all', 'none'] as const;
export const DEFAULT_FIREWALL_PRESET = 'ssh-only';
/** The instance sorts lists support. */
export const INSTANCE_SORTS = ['created_at', 'name', 'status', 'instance_type'] as const;
