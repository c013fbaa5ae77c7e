/**
 * Settings → Account: the profile (GET/PATCH /v1/account: name, e-mail, company, billing e-mail; plan
 * and status are the operator's) and the quotas as usage bars (GET /v1/account/quota).
 */
import { useEffect, useState } from 'preact/hooks';
import { unwrap } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { TextField } from '../components/field.tsx';
import { UsageBar } from '../components/usage-bar.tsx';
import { formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import './account-billing.css';

const QUOTA_LABELS: Record<string, string> = {
  instances: 'Instances',
  vcpus: 'vCPUs',
  gpus: 'GPUs',
  volumes: 'Volumes',
  volume_storage_gb: 'Volume storage (GB)',
  snapshots: 'Snapshots',
  firewall_rules: 'Firewall rules',
  vpns: 'VPNs',
  api_keys: 'API keys',
  webhooks: 'Webhooks',
  alerts: 'Alert policies',
};

export function AccountPanel() {
  const api = currentSession().api;
  const account = useLoad(async () => (await unwrap(api.GET('/v1/account'))).data, []);
  const quota = useLoad(async () => (await unwrap(api.GET('/v1/account/quota'))).data, []);
  return (
    <>
      <h2>Account</h2>
      <ErrorNotice error={account.error} />
      {account.data && (
        <dl class="facts">
          <dt>Account id</dt>
          <dd>
            <code>{account.data.id}</code>
          </dd>
          <dt>Plan</dt>
          <dd>{account.data.plan}</dd>
          <dt>Status</dt>
          <dd>{account.data.status}</dd>
          <dt>Created</dt>
          <dd>{formatDate(account.data.created_at)}</dd>
        </dl>
      )}
      {account.data && <ProfileForm account={account.data} onSaved={account.reload} />}
      <h2>Quotas</h2>
      <p class="muted">What your plan allows and how much of it is in use. Ask support to raise a limit.</p>
      <ErrorNotice error={quota.error} />
      {quota.data && (
        <div class="usage-bars">
          {quota.data.map((q) => (
            <UsageBar key={q.name} label={QUOTA_LABELS[q.name] ?? q.name} used={q.used} limit={q.limit} />
          ))}
        </div>
      )}
    </>
  );
}

interface Profile {
  name: string;
  email: string;
  company: string | null;
  billing_email: string | null;
}

function ProfileForm({ account, onSaved }: { account: Profile; onSaved: () => void }) {
  const [form, setForm] = useState({
    name: account.name,
    email: account.email,
    company: account.company ?? '',
    billing_email: account.billing_email ?? '',
  });
  const { error, attempt } = useAttempt();
  const [saved, setSaved] = useState(false);
  useEffect(() => setSaved(false), [form]);

  const submit = (event: Event) => {
    event.preventDefault();
    void attempt(async () => {
      await unwrap(
        currentSession().api.PATCH('/v1/account', {
          body: {
            name: form.name,
            email: form.email,
            company: form.company.trim() || null,
            billing_email: form.billing_email.trim() || null,
          },
        }),
      );
      setSaved(true);
      onSaved();
    });
  };
  const input = (
    key: keyof typeof form,
    label: string,
    type: 'text' | 'email' = 'text',
    required = false,
  ) => (
    <TextField
      label={label}
      type={type}
      required={required}
      value={form[key]}
      onValue={(text) => setForm({ ...form, [key]: text })}
    />
  );

  return (
    <form class="card" onSubmit={submit} aria-label="Profile">
      <div class="grid-form">
        {input('name', 'Account name', 'text', true)}
        {input('email', 'E-mail', 'email', true)}
        {input('company', 'Company (on invoices)')}
        {input('billing_email', 'Billing e-mail', 'email')}
      </div>
      <ErrorNotice error={error} />
      <div class="actions">
        <button type="submit" class="primary">
          Save profile
        </button>
        {saved && (
          <span role="status" class="muted">
            Saved.
          </span>
        )}
      </div>
    </form>
  );
}
