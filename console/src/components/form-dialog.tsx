/**
 * The shell of every form that creates or changes something: the fields (children), Cancel, a submit
 * button that is disabled while the submit runs, and the submit's failure (message and request id) just
 * above the buttons. `onSubmit` runs through useAttempt, so it only has to throw to show a failure.
 *
 * Inline by default: a card above the page's table, named by `title` (the create forms). With `modal` it
 * is a native modal <dialog> headed by `title`: focus stays inside, Escape cancels, and focus goes back to
 * the opener when it closes (edits opened from a table row, where a card far above the row would be
 * missed).
 */
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
import { useAttempt } from '../use-attempt.ts';
import { ErrorNotice } from './error-notice.tsx';
import { useModal } from './modal.ts';

interface Props {
  /** The form's accessible name; also its visible heading when modal. */
  title: string;
  submitLabel: string;
  onSubmit: () => unknown;
  onCancel: () => void;
  children: ComponentChildren;
  /** False keeps the submit button disabled (nothing to submit yet). */
  canSubmit?: boolean;
  /** A failure of the form's own (e.g. loading its choices), shown while no submit has failed. */
  error?: unknown;
  modal?: boolean;
  /** Extra class of the modal <dialog> (e.g. `dialog-wide` for a form with many fields). */
  dialogClass?: string;
}

export function FormDialog(props: Props) {
  const { error, busy, attempt } = useAttempt();
  const submit = (event: Event) => {
    event.preventDefault();
    void attempt(props.onSubmit);
  };
  const body = (
    <>
      {props.children}
      <ErrorNotice error={error ?? props.error} />
      <div class="actions">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="submit" class="primary" disabled={busy || props.canSubmit === false}>
          {props.submitLabel}
        </button>
      </div>
    </>
  );
  if (!props.modal) {
    return (
      <form class="stack card" onSubmit={submit} aria-label={props.title}>
        {body}
      </form>
    );
  }
  return (
    <ModalForm title={props.title} class={props.dialogClass} onSubmit={submit} onCancel={props.onCancel}>
      {body}
    </ModalForm>
  );
}

function ModalForm(props: {
  title: string;
  class: string | undefined;
  onSubmit: (event: Event) => void;
  onCancel: () => void;
  children: ComponentChildren;
}) {
  const ref = useModal();
  const titleId = useId();
  return (
    <dialog
      ref={ref}
      class={props.class}
      aria-labelledby={titleId}
      onCancel={(event) => {
        // The dialog stays open until the page stops rendering it (Escape goes through onCancel).
        event.preventDefault();
        props.onCancel();
      }}
    >
      <form class="stack" onSubmit={props.onSubmit} aria-labelledby={titleId}>
        <h2 id={titleId}>{props.title}</h2>
        {props.children}
      </form>
    </dialog>
  );
}
