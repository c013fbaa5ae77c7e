/**
 * Settings: API Keys (the default), SSH Keys and Account, reached by sub-links whose `?tab=` keeps
 * each one a deep link (the server answers any query string under /console/).
 */
import { useLocation } from 'preact-iso';
import { Tabs } from '../components/tabs.tsx';
import { AccountPanel } from './account.tsx';
import { ApiKeysPanel } from './api-keys.tsx';
import { SshKeysPanel } from './ssh-keys.tsx';

const TABS = [
  { key: 'keys', label: 'API Keys', href: '/console/settings', panel: ApiKeysPanel },
  { key: 'ssh-keys', label: 'SSH Keys', href: '/console/settings?tab=ssh-keys', panel: SshKeysPanel },
  { key: 'account', label: 'Account', href: '/console/settings?tab=account', panel: AccountPanel },
];

export function SettingsPage() {
  const { query } = useLocation();
  const tab = TABS.find((t) => t.key === query.tab) ?? TABS[0]!;
  const Panel = tab.panel;
  return (
    <section class="narrow-safe">
      <h1>Settings</h1>
      <Tabs label="Settings" tabs={TABS} current={tab.href} />
      <Panel />
    </section>
  );
}
