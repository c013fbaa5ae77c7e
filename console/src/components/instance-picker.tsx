/**
 * The dialog that asks which of the account's instances in a region an action is for (attach a volume,
 * assign a public IP), and the account's instances it chooses from.
 */
import { useState } from 'preact/hooks';
import { type Schemas, unwrap } from '../api.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { SelectField } from './field.tsx';
import { FormDialog } from './form-dialog.tsx';

type Instance = Schemas['Instance'];

/** The account's instances (their first 100), for the pickers. */
export function useInstanceChoices() {
  return useLoad(
    async () =>
      (await unwrap(currentSession().api.GET('/v1/instances', { params: { query: { limit: 100 } } }))).data,
    [],
  );
}

export function InstancePickerDialog(props: {
  title: string;
  submitLabel: string;
  region: string;
  /** The instances that can take the action, all in `region`. */
  instances: Instance[];
  /** What to say when none can. */
  noneMessage: string;
  onCancel: () => void;
  onSubmit: (instanceId: string) => void;
}) {
  const [instanceId, setInstanceId] = useState(props.instances[0]?.id ?? '');
  return (
    <FormDialog
      title={props.title}
      submitLabel={props.submitLabel}
      canSubmit={Boolean(instanceId)}
      onSubmit={() => props.onSubmit(instanceId)}
      onCancel={props.onCancel}
    >
      {props.instances.length === 0 ? (
        <p>{props.noneMessage}</p>
      ) : (
        <SelectField
          label={`Instance in ${props.region}`}
          value={instanceId}
          options={props.instances.map((i) => ({ value: i.id, label: `${i.name} (${i.status})` }))}
          onValue={setInstanceId}
        />
      )}
    </FormDialog>
  );
}
