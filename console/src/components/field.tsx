/**
 * Labelled form controls. The label is tied to the control by a generated id, and a hint, when given, is
 * shown below the control and announced with it (aria-describedby), so no page has to invent ids.
 */
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useId } from 'preact/hooks';

interface FieldFrame {
  label: ComponentChildren;
  hint?: ComponentChildren;
  /** Spans the whole row of a form grid (class "field wide"). */
  wide?: boolean;
}

export function Field(
  props: FieldFrame & { children: (id: string, describedBy: string | undefined) => ComponentChildren },
) {
  const id = useId();
  const hintId = `${id}-hint`;
  const hasHint =
    props.hint !== undefined && props.hint !== null && props.hint !== false && props.hint !== '';
  return (
    <div class={props.wide ? 'field wide' : 'field'}>
      <label for={id}>{props.label}</label>
      {props.children(id, hasHint ? hintId : undefined)}
      {hasHint && (
        <small id={hintId} class="muted">
          {props.hint}
        </small>
      )}
    </div>
  );
}

/**
 * The attributes a page may still set on the input itself. Listed rather than derived from preact's input
 * attributes: those are a union keyed by type, which does not survive Omit.
 */
interface InputRest {
  type?:
    | 'text'
    | 'number'
    | 'password'
    | 'url'
    | 'email'
    | 'date'
    | 'datetime-local'
    | 'time'
    | 'search'
    | 'tel';
  required?: boolean;
  placeholder?: string;
  min?: number | string;
  max?: number | string;
  step?: number | string;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  autocomplete?: string;
  inputMode?: 'numeric' | 'decimal' | 'text' | 'email' | 'url' | 'search' | 'tel';
  spellcheck?: boolean;
  disabled?: boolean;
  readOnly?: boolean;
  name?: string;
  class?: string;
}

/** A text-like input (text, number, password, url, date, ...) reporting its value as typed. */
export function TextField(
  props: FieldFrame & InputRest & { value: string | number; onValue: (value: string) => void },
) {
  const { label, hint, wide, value, onValue, ...input } = props;
  return (
    <Field label={label} hint={hint} wide={wide}>
      {(id, describedBy) => {
        // preact types an input's attributes as a union keyed by `type`; every InputRest entry is valid for
        // each type this component accepts, so the object is asserted to that union once, here.
        const attributes = {
          ...input,
          id,
          'aria-describedby': describedBy,
          value,
          onInput: (e: { currentTarget: HTMLInputElement }) => onValue(e.currentTarget.value),
        } as InputHTMLAttributes<HTMLInputElement>;
        return <input {...attributes} />;
      }}
    </Field>
  );
}

export type SelectOption<T extends string> = T | { value: T; label: string };

interface SelectRest {
  required?: boolean;
  disabled?: boolean;
  name?: string;
  class?: string;
}

/**
 * A select whose options come from `options` (a plain string is both value and text) and/or `children`
 * (option elements written by the page, placed after them). Values are the page's own option values, so
 * `onValue` hands them back with the page's type.
 */
export function SelectField<T extends string>(
  props: FieldFrame &
    SelectRest & {
      value: T;
      onValue: (value: T) => void;
      options?: readonly SelectOption<T>[];
      children?: ComponentChildren;
    },
) {
  const { label, hint, wide, value, onValue, options, children, ...select } = props;
  return (
    <Field label={label} hint={hint} wide={wide}>
      {(id, describedBy) => (
        <select
          {...select}
          id={id}
          aria-describedby={describedBy}
          value={value}
          onChange={(e) => onValue(e.currentTarget.value as T)}
        >
          {options?.map((option) =>
            typeof option === 'string' ? (
              <option key={option} value={option}>
                {option}
              </option>
            ) : (
              <option key={option.value} value={option.value}>
                {option.label}
              </option>
            ),
          )}
          {children}
        </select>
      )}
    </Field>
  );
}

/** A multi-line text control (pasted keys, cloud-init user data) reporting its value as typed. */
export function TextAreaField(
  props: FieldFrame & {
    value: string;
    onValue: (value: string) => void;
    rows?: number;
    required?: boolean;
    placeholder?: string;
    class?: string;
  },
) {
  const { label, hint, wide, value, onValue, ...textarea } = props;
  return (
    <Field label={label} hint={hint} wide={wide}>
      {(id, describedBy) => (
        <textarea
          {...textarea}
          id={id}
          aria-describedby={describedBy}
          value={value}
          onInput={(e) => onValue(e.currentTarget.value)}
        />
      )}
    </Field>
  );
}
