/** A labelled form control: the label is tied to the control, with an optional hint below it. */
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';

export function Field(props: { label: string; hint?: string; children: (id: string) => ComponentChildren }) {
  const id = useId();
  const hintId = `${id}-hint`;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id)}
      {props.hint && (
        <small id={hintId} class="muted">
          {props.hint}
        </small>
      )}
    </div>
  );
}
