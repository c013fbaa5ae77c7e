/**
 * An instance's backup schedule as the create form and the edit dialog take it: how often (or no backups)
 * and, when there is a schedule, how many scheduled snapshots to keep (the API's 1–90).
 */
import { SelectField, TextField } from '../components/field.tsx';

export type BackupFrequency = 'hourly' | 'daily' | 'weekly';

export interface BackupChoice {
  frequency: BackupFrequency | '';
  /** As typed: a number of snapshots. */
  retention: string;
}

/** The choice as the API's `backup_schedule`: null for no backups. */
export function backupSchedule(choice: BackupChoice) {
  return choice.frequency ? { frequency: choice.frequency, retention: Number(choice.retention) } : null;
}

export function BackupFields(props: { value: BackupChoice; onChange: (value: BackupChoice) => void }) {
  const { value, onChange } = props;
  return (
    <div class="field-row">
      <SelectField
        label="Backups"
        value={value.frequency}
        options={[{ value: '', label: 'No backups' }, 'hourly', 'daily', 'weekly']}
        onValue={(frequency) => onChange({ ...value, frequency })}
      />
      {value.frequency && (
        <TextField
          label="Backups kept"
          type="number"
          min={1}
          max={90}
          required
          value={value.retention}
          onValue={(retention) => onChange({ ...value, retention })}
        />
      )}
    </div>
  );
}
