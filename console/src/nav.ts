/**
 * The console's pages: one entry per navigation link, in the order the header shows them. To add a page,
 * write console/src/pages/<name>.tsx and point its entry here (and add any sub-routes in app.tsx).
 */
import type { FunctionComponent } from 'preact';
import { AlertsPage } from './pages/alerts.tsx';
import { BillingPage } from './pages/billing.tsx';
import { InstancesPage } from './pages/instances.tsx';
import { NetworkingPage } from './pages/networking.tsx';
import { PublicIpsPage } from './pages/public-ips.tsx';
import { SettingsPage } from './pages/settings.tsx';
import { SnapshotsPage } from './pages/snapshots.tsx';
import { VolumesPage } from './pages/volumes.tsx';
import { WebhooksPage } from './pages/webhooks.tsx';

export interface NavEntry {
  label: string;
  path: string;
  page: FunctionComponent;
}

export const NAV: NavEntry[] = [
  { label: 'Instances', path: '/console/instances', page: InstancesPage },
  { label: 'Volumes', path: '/console/volumes', page: VolumesPage },
  { label: 'Snapshots', path: '/console/snapshots', page: SnapshotsPage },
  { label: 'Networking', path: '/console/networking', page: NetworkingPage },
  { label: 'Public IPs', path: '/console/public-ips', page: PublicIpsPage },
  { label: 'Alerts', path: '/console/alerts', page: AlertsPage },
  { label: 'Webhooks', path: '/console/webhooks', page: WebhooksPage },
  { label: 'Billing', path: '/console/billing', page: BillingPage },
  { label: 'Settings', path: '/console/settings', page: SettingsPage },
];
