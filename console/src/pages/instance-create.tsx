/**
 * Create instance: the form for POST /v1/instances. The type picker lists the catalogue for the chosen
 * region (vCPU, RAM, GPU, price) and the estimate comes from GET /v1/billing/estimate as choices change.
 */

import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { unwrap } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField, TextAreaField, TextField } from '../components/field.tsx';
import { formatMoney, formatPrice } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { parseTags } from '../tags.ts';
import { useAttempt } from '../use-attempt.ts';
import { type BackupChoice, BackupFields, backupSchedule } from './backup-fields.tsx';
import {
  type ImageName,
  type InstanceTypeName,
  type RegionName,
  useInstanceTypes,
} from './instance-types.ts';
import { REGIONS } from './instances.tsx';

const HOURS_PER_MONTH = 730;
export const FIREWALL_PRESETS = ['ssh-only', 'web', 'allow-all', 'none'] as const;

export function InstanceCreatePage() {
  const { route } = useLocation();
  const api = currentSession().api;
  const [name, setName] = useState('');
  const [region, setRegion] = useState<RegionName>('us-east-1');
  const [type, setType] = useState<InstanceTypeName>('compute-1x');
  const [image, setImage] = useState<ImageName>('ubuntu-24.04');
  const [sshKeys, setSshKeys] = useState<string[]>([]);
  const [tags, setTags] = useState('');
  const [userData, setUserData] = useState('');
  const [firewall, setFirewall] = useState<(typeof FIREWALL_PRESETS)[number]>('ssh-only');
  const [backup, setBackup] = useState<BackupChoice>({ frequency: '', retention: '7' });
  const { error, busy, attempt } = useAttempt();

  const types = useInstanceTypes(region);
  const images = useLoad(async () => (await unwrap(api.GET('/v1/images', {}))).data, []);
  const keys = useLoad(async () => (await unwrap(api.GET('/v1/ssh-keys', {}))).data, []);
  const estimate = useLoad(
    async () =>
      (
        await unwrap(
          api.GET('/v1/billing/estimate', {
            params: { query: { instance_type: type, region, hours: HOURS_PER_MONTH } },
          }),
        )
      ).data,
    [type, region],
  );

  const submit = (event: Event) => {
    event.preventDefault();
    void attempt(async () => {
      await unwrap(
        api.POST('/v1/instances', {
          body: {
            name,
            instance_type: type,
            region,
            image,
            ssh_keys: sshKeys,
            tags: parseTags(tags),
            firewall_preset: firewall,
            ...(userData ? { user_data: userData } : {}),
            ...(backup.frequency ? { backup_schedule: backupSchedule(backup) } : {}),
          },
        }),
      );
      // Back to the list, where the new instance's badge follows it from starting to running.
      route('/console/instances');
    });
  };

  return (
    <section>
      <h1>Create instance</h1>
      <form class="stack" onSubmit={submit}>
        <TextField label="Name" required placeholder="web-1" value={name} onValue={setName} />
        <SelectField label="Region" value={region} options={REGIONS} onValue={setRegion} />
        <fieldset class="type-picker">
          <legend>Instance type</legend>
          <ErrorNotice error={types.error} />
          {(types.data ?? []).map((t) => (
            <label key={t.name} class={`type-option${t.name === type ? ' selected' : ''}`}>
              <input
                type="radio"
                name="instance-type"
                value={t.name}
                checked={t.name === type}
                onChange={() => setType(t.name as InstanceTypeName)}
              />
              <span class="type-name">{t.name}</span>
              <span>{t.vcpus} vCPU</span>
              <span>{t.memory_gb} GB RAM</span>
              <span>{t.gpu ? `${t.gpu.count}× ${t.gpu.model}` : 'no GPU'}</span>
              <span>{formatPrice(t.price_per_hour)}</span>
            </label>
          ))}
        </fieldset>
        <p class="estimate" aria-live="polite">
          {estimate.data
            ? `Estimate: ${formatMoney(estimate.data.total)} a month (${HOURS_PER_MONTH} h)`
            : 'Estimating…'}
        </p>
        <SelectField
          label="Image"
          value={image}
          options={(images.data ?? [{ name: image, description: image }]).map((i) => ({
            value: i.name as ImageName,
            label: `${i.name} — ${i.description}`,
          }))}
          onValue={setImage}
        />
        <fieldset>
          <legend>SSH keys</legend>
          {keys.data?.length === 0 && (
            <p class="muted">
              No SSH keys yet: add one in Settings (or with <code>nimbus ssh-keys add</code>) to log in with
              it.
            </p>
          )}
          {(keys.data ?? []).map((key) => (
            <label key={key.id} class="check">
              <input
                type="checkbox"
                checked={sshKeys.includes(key.id)}
                onChange={(event) =>
                  setSshKeys(
                    event.currentTarget.checked
                      ? [...sshKeys, key.id]
                      : sshKeys.filter((id) => id !== key.id),
                  )
                }
              />
              {key.name} <code class="muted">{key.fingerprint}</code>
            </label>
          ))}
        </fieldset>
        <TextField label="Tags" placeholder="env=prod, team=web" value={tags} onValue={setTags} />
        <SelectField
          label="Firewall preset"
          value={firewall}
          options={FIREWALL_PRESETS}
          onValue={setFirewall}
        />
        <BackupFields value={backup} onChange={setBackup} />
        <TextAreaField
          label="User data"
          rows={4}
          placeholder="#cloud-config"
          value={userData}
          onValue={setUserData}
        />
        <ErrorNotice error={error} />
        <div class="actions">
          <a class="button" href="/console/instances">
            Cancel
          </a>
          <button type="submit" class="primary" disabled={busy}>
            Create instance
          </button>
        </div>
      </form>
    </section>
  );
}
