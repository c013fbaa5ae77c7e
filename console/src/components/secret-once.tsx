/**
 * A secret the API returns only once (a new API key, a webhook signing secret): the warning, the secret
 * in a read-only box that selects itself on focus, a copy button, and "I have saved it" to dismiss it.
 * Once dismissed it is gone from the page: nothing keeps it.
 */
import type { ComponentChildren } from 'preact';
import { useId, useState } from 'preact/hooks';

export function SecretOnce(props: {
  /** The panel's accessible name. */
  title: string;
  /** The text box's label. */
  label: string;
  copyLabel: string;
  secret: string;
  onDone: () => void;
  /** The warning (and any note) above the box. */
  children: ComponentChildren;
}) {
  const [copied, setCopied] = useState(false);
  const id = useId();
  return (
    <section class="notice notice-secret" aria-label={props.title}>
      {props.children}
      <p>
        <label for={id}>{props.label}</label>
        <input
          id={id}
          class="secret"
          readOnly
          value={props.secret}
          onFocus={(e) => e.currentTarget.select()}
        />
      </p>
      <div class="actions">
        <button
          type="button"
          onClick={async () => {
            await navigator.clipboard.writeText(props.secret);
            setCopied(true);
          }}
        >
          {copied ? 'Copied' : props.copyLabel}
        </button>
        <button type="button" onClick={props.onDone}>
          I have saved it
        </button>
      </div>
    </section>
  );
}
