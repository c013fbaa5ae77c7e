/** The console's navigation links, by their exact accessible names (issue 23 makes them a contract). */
export const NAV_LABELS = [
  'Instances',
  'Volumes',
  'Snapshots',
  'Networking',
  'Alerts',
  'Webhooks',
  'Billing',
  'Settings',
] as const;
