/**
 * Edit an instance's settings from its detail page: name, tags, firewall preset, monitoring, backup
 * schedule and deletion protection, everything PATCH /v1/instances/{id} takes (type, region and image have their own actions or
 * none). Only the changed fields are sent, so the `instance.updated` event names just those.
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type Instance, unwrap } from '../api.ts';
import { SelectField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { currentSession } from '../session.ts';
import { formatTags, parseTags } from '../tags.ts';
import { type BackupChoice, BackupFields, type BackupFrequency, backupSchedule } from './backup-fields.tsx';
import { FIREWALL_PRESETS } from './instance-create.tsx';
import { ProtectionCheck } from './name-tags-edit.tsx';

type InstancePatch = paths['/v1/instances/{id}']['patch']['requestBody']['content']['application/json'];
type Preset = (typeof FIREWALL_PRESETS)[number];

export interface Draft {
  name: string;
  tags: string;
  firewallPreset: Preset;
  monitoring: boolean;
  backup: BackupChoice;
  /** protection.delete: the instance's DELETE is refused while on. */
  protect: boolean;
}

export function draftOf(instance: Instance): Draft {
  return {
    name: instance.name,
    tags: formatTags(instance.tags),
    firewallPreset: instance.firewall_preset as Preset,
    monitoring: instance.monitoring,
    backup: {
      frequency: (instance.backup_schedule?.frequency as BackupFrequency | undefined) ?? '',
      retention: String(instance.backup_schedule?.retention ?? 7),
    },
    protect: instance.protection.delete,
  };
}

export function patchBody(before: Draft, after: Draft): InstancePatch {
  const body: InstancePatch = {};
  if (after.name !== before.name) body.name = after.name;
  if (after.tags !== before.tags) body.tags = parseTags(after.tags);
  if (after.firewallPreset !== before.firewallPreset) body.firewall_preset = after.firewallPreset;
  if (after.monitoring !== before.monitoring) body.monitoring = after.monitoring;
  if (after.protect !== before.protect) body.protection = { delete: after.protect };
  const { backup } = after;
  if (
    backup.frequency !== before.backup.frequency ||
    (backup.frequency && backup.retention !== before.backup.retention)
  )
    body.backup_schedule = backupSchedule(backup);
  return body;
}

export function InstanceEditDialog(props: { instance: Instance; onCancel: () => void; onSaved: () => void }) {
  const [initial] = useState(() => draftOf(props.instance));
  const [draft, setDraft] = useState(initial);
  const set = (change: Partial<Draft>) => setDraft({ ...draft, ...change });

  const submit = async () => {
    const body = patchBody(initial, draft);
    // Nothing changed: the API refuses an empty PATCH, and there is nothing to save.
    if (Object.keys(body).length > 0)
      await unwrap(
        currentSession().api.PATCH('/v1/instances/{id}', {
          params: { path: { id: props.instance.id } },
          body,
        }),
      );
    props.onSaved();
  };

  return (
    <FormDialog
      modal
      title={`Edit ${props.instance.name}`}
      submitLabel="Save"
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField
        label="Name"
        required
        hint="Up to 64 letters, digits, dots, dashes and underscores. The DNS names keep the instance id."
        value={draft.name}
        onValue={(name) => set({ name })}
      />
      <TextField
        label="Tags"
        placeholder="env=prod, team=web"
        hint="Comma-separated key=value pairs; they replace all the current tags. Firewall rules and alert policies that select by tag follow them at once."
        value={draft.tags}
        onValue={(tags) => set({ tags })}
      />
      <SelectField
        label="Firewall preset"
        value={draft.firewallPreset}
        options={FIREWALL_PRESETS}
        onValue={(firewallPreset) => set({ firewallPreset })}
      />
      <BackupFields value={draft.backup} onChange={(backup) => set({ backup })} />
      <label class="check">
        <input
          type="checkbox"
          checked={draft.monitoring}
          onChange={(e) => set({ monitoring: e.currentTarget.checked })}
        />
        Monitoring (metrics, charts and alerts)
      </label>
      <ProtectionCheck value={draft.protect} onValue={(protect) => set({ protect })} />
    </FormDialog>
  );
}
