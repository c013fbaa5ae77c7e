/**
 * The actions on one instance — start, stop, force stop, restart, resize, delete — each through its API
 * call, destructive ones after a confirmation, each offered only in the statuses the server's state table
 * accepts it from. Shared by the list rows and the detail page.
 */
import { useState } from 'preact/hooks';
import { allows, type Instance, type StateAction, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { type InstanceTypeName, useInstanceTypes } from './instance-types.ts';

interface Props {
  instance: Instance;
  /** The live status (the stream's, when newer than the loaded instance). */
  status: string;
  /** The status an action's answer reports (e.g. `stopping`), shown until the stream says more. */
  onStatus: (status: string) => void;
  onChanged: () => void;
}

export function InstanceActions({ instance, status, onStatus, onChanged }: Props) {
  const confirmation = useConfirm();
  const { error, attempt } = useAttempt();
  const [resizing, setResizing] = useState(false);
  const api = currentSession().api;
  const path = { params: { path: { id: instance.id } } };

  const run = (action: () => Promise<{ data: Instance }>) =>
    attempt(async () => {
      const answer = await action();
      onStatus(answer.data.status);
      onChanged();
    });
  const ask = (title: string, body: string, label: string, action: () => Promise<{ data: Instance }>) =>
    confirmation.ask(title, body, label, () => run(action));

  const offers = (action: StateAction<'instance'>) => allows('instance', action, status);
  return (
    <fieldset class="row-actions">
      <legend class="visually-hidden">Actions for {instance.name}</legend>
      {offers('start') && (
        <button type="button" onClick={() => run(() => unwrap(api.POST('/v1/instances/{id}/start', path)))}>
          Start
        </button>
      )}
      {offers('stop') && (
        <button
          type="button"
          onClick={() =>
            ask(
              `Stop ${instance.name}?`,
              'The instance shuts down cleanly; its disks are kept.',
              'Stop',
              () => unwrap(api.POST('/v1/instances/{id}/stop', path)),
            )
          }
        >
          Stop
        </button>
      )}
      {offers('force_stop') && (
        <button
          type="button"
          onClick={() =>
            ask(
              `Force stop ${instance.name}?`,
              'Like pulling the plug: unsaved data in the instance is lost.',
              'Force stop',
              () => unwrap(api.POST('/v1/instances/{id}/stop', { ...path, body: { force: true } })),
            )
          }
        >
          Force stop
        </button>
      )}
      {offers('restart') && (
        <button
          type="button"
          onClick={() =>
            ask(
              `Restart ${instance.name}?`,
              'The instance reboots; it is unreachable meanwhile.',
              'Restart',
              () => unwrap(api.POST('/v1/instances/{id}/restart', path)),
            )
          }
        >
          Restart
        </button>
      )}
      {offers('resize') && (
        <button type="button" onClick={() => setResizing(true)}>
          Resize
        </button>
      )}
      {offers('delete') && (
        <button
          type="button"
          class="danger"
          onClick={() =>
            ask(
              `Delete ${instance.name}?`,
              'The instance and its root disk are deleted. This cannot be undone.',
              'Delete',
              async () => {
                await unwrap(api.DELETE('/v1/instances/{id}', path));
                return { data: { ...instance, status: 'deleting' } };
              },
            )
          }
        >
          Delete
        </button>
      )}
      {resizing && (
        <ResizeDialog
          instance={instance}
          onClose={() => setResizing(false)}
          onResize={(type) => {
            setResizing(false);
            void run(() =>
              unwrap(api.POST('/v1/instances/{id}/resize', { ...path, body: { instance_type: type } })),
            );
          }}
        />
      )}
      {confirmation.dialog}
      <ErrorNotice error={error} />
    </fieldset>
  );
}

function ResizeDialog(props: {
  instance: Instance;
  onClose: () => void;
  onResize: (type: InstanceTypeName) => void;
}) {
  const types = useInstanceTypes(props.instance.region);
  const [choice, setChoice] = useState(props.instance.instance_type);
  return (
    <FormDialog
      modal
      title={`Resize ${props.instance.name}`}
      submitLabel="Resize"
      error={types.error}
      onSubmit={() => props.onResize(choice as InstanceTypeName)}
      onCancel={props.onClose}
    >
      <p>A running instance stops, takes the new type and starts again; its disk keeps its data.</p>
      <SelectField
        label="New instance type"
        value={choice}
        options={(types.data ?? []).map((type) => ({
          value: type.name,
          label: `${type.name} — ${type.vcpus} vCPU, ${type.memory_gb} GB`,
        }))}
        onValue={setChoice}
      />
    </FormDialog>
  );
}
