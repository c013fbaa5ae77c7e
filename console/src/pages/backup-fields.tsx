/**
 * An instance's backup schedule as the create form and the edit dialog take it: how often (or no backups)
 * and, when there is a schedule, how many scheduled snapshots to keep (the API's 1–90).
 */
import { useId } from 'preact/hooks';

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
  const id = useId();
  const { value, onChange } = props;
  return (
    <div class="field-row">
      <div class="field">
        <label for={`${id}-frequency`}>Backups</label>
        <select
          id={`${id}-frequency`}
          value={value.frequency}
          onChange={(e) =>
            onChange({ ...value, frequency: e.currentTarget.value as BackupChoice['frequency'] })
          }
        >
          <option value="">No backups</option>
          <option value="hourly">hourly</option>
          <option value="daily">daily</option>
          <option value="weekly">weekly</option>
        </select>
      </div>
      {value.frequency && (
        <div class="field">
          <label for={`${id}-retention`}>Backups kept</label>
          <input
            id={`${id}-retention`}
            type="number"
            min={1}
            max={90}
            required
            value={value.retention}
            onInput={(e) => onChange({ ...value, retention: e.currentTarget.value })}
          />
        </div>
      )}
    </div>
  );
}
