/**
 * Webhooks: the subscriptions (GET /v1/webhooks), Create webhook (URL, events; the signing secret Nimbus
 * generates is shown once, like an API key), Edit (URL, description, events: a dialog from the row,
 * sending only what changed), Send test, Rotate secret (POST /v1/webhooks/{id}/rotate-secret:
 * the new secret shown once, with how long the previous one keeps signing beside it), enable and disable,
 * delete after a confirmation, and each one's delivery log (GET /v1/webhooks/{id}/deliveries) with
 * Redeliver.
 */
import { useState } from 'preact/hooks';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { SecretOnce } from '../components/secret-once.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { Pager, Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import { createBody, NEW_WEBHOOK, patchBody, type WebhookDraft, webhookDraftOf } from './webhook-draft.ts';
import './account-billing.css';

type Webhook = Schemas['Webhook'];
type Delivery = Schemas['WebhookDelivery'];
type Rotated = Schemas['WebhookWithSecret'];
interface FreshSecret {
  url: string;
  secret: string;
  /** The rotation's answer, or null for a new webhook's first secret. */
  rotation: Rotated | null;
}
const MAX_OVERLAP_HOURS = 168;

export function WebhooksPage() {
  const api = currentSession().api;
  const hooks = useLoad(
    async () => (await unwrap(api.GET('/v1/webhooks', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  const [creating, setCreating] = useState(false);
  /** A signing secret to show once: a new webhook's, or a rotation's (with the previous one's end). */
  const [fresh, setFresh] = useState<FreshSecret | null>(null);
  const [rotating, setRotating] = useState<Webhook | null>(null);
  const [editing, setEditing] = useState<Webhook | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [logVersion, setLogVersion] = useState(0);
  const [notice, setNotice] = useState<string | null>(null);
  const { error, attempt } = useAttempt();
  const { confirm, dialog } = useConfirm();

  const act = (work: () => Promise<void>) => {
    setNotice(null);
    return attempt(work);
  };
  const remove = (hook: Webhook) =>
    act(async () => {
      const yes = await confirm(
        `Delete the webhook to ${hook.url}?`,
        'Its delivery log goes with it, and pending deliveries are not sent.',
        'Delete',
      );
      if (!yes) return;
      await unwrap(api.DELETE('/v1/webhooks/{id}', { params: { path: { id: hook.id } } }));
      if (selected === hook.id) setSelected(null);
      hooks.reload();
    });
  const sendTest = (hook: Webhook) =>
    act(async () => {
      const delivery = (
        await unwrap(api.POST('/v1/webhooks/{id}/test', { params: { path: { id: hook.id } } }))
      ).data;
      setNotice(
        `Test sent to ${hook.url}: ${delivery.status}` +
          (delivery.last_status_code ? ` (HTTP ${delivery.last_status_code})` : '') +
          (delivery.last_error ? ` — ${delivery.last_error}` : ''),
      );
      setSelected(hook.id);
      setLogVersion((n) => n + 1);
    });
  const toggle = (hook: Webhook) =>
    act(async () => {
      await unwrap(
        api.PATCH('/v1/webhooks/{id}', {
          params: { path: { id: hook.id } },
          body: { enabled: !hook.enabled },
        }),
      );
      hooks.reload();
    });
  const selectedHook = hooks.data?.find((h) => h.id === selected) ?? null;

  return (
    <section class="narrow-safe">
      <div class="page-head">
        <h1>Webhooks</h1>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create webhook
        </button>
      </div>
      {fresh && <NewSecret {...fresh} onDone={() => setFresh(null)} />}
      {rotating && (
        <RotateSecretForm
          hook={rotating}
          onCancel={() => setRotating(null)}
          onRotated={(answer) => {
            setRotating(null);
            setNotice(null);
            if (answer.secret) {
              setFresh({ url: answer.url, secret: answer.secret, rotation: answer });
            } else {
              setNotice(
                `The signing secret of ${answer.url} is now the one you gave. ${overlapNote(answer.previous_secret_expires_at)}`,
              );
            }
            hooks.reload();
          }}
        />
      )}
      {editing && (
        <WebhookForm
          hook={editing}
          onCancel={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            hooks.reload();
          }}
        />
      )}
      {creating && (
        <WebhookForm
          onCancel={() => setCreating(false)}
          onSaved={(url, secret) => {
            setCreating(false);
            if (secret) setFresh({ url, secret, rotation: null });
            hooks.reload();
          }}
        />
      )}
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ErrorNotice error={error ?? hooks.error} />
      {hooks.data && hooks.data.length === 0 ? (
        <EmptyState title="No webhooks">
          <p>
            Create a webhook to have Nimbus POST signed events (instance started, invoice created…) to your
            URL.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="Webhook subscriptions"
          rows={hooks.data ?? []}
          rowKey={(h) => h.id}
          columns={[
            { label: 'URL', render: (h) => <code>{h.url}</code> },
            { label: 'Events', render: (h) => h.events.join(', ') },
            {
              label: 'Status',
              render: (h) => (
                <>
                  <StatusBadge status={h.enabled ? h.status : 'disabled'} />
                  {h.disabled_reason && <small class="muted"> {h.disabled_reason}</small>}
                  {h.previous_secret_expires_at && Date.parse(h.previous_secret_expires_at) > Date.now() && (
                    <small class="muted">
                      {' '}
                      The previous secret also signs until {formatDate(h.previous_secret_expires_at)}.
                    </small>
                  )}
                </>
              ),
            },
            { label: 'Created', render: (h) => formatDate(h.created_at) },
            {
              label: 'Actions',
              render: (h) => (
                <div class="row-actions">
                  <button
                    type="button"
                    aria-pressed={selected === h.id}
                    aria-label={`Deliveries of ${h.url}`}
                    onClick={() => setSelected(selected === h.id ? null : h.id)}
                  >
                    Deliveries
                  </button>
                  <button type="button" aria-label={`Send test to ${h.url}`} onClick={() => sendTest(h)}>
                    Send test
                  </button>
                  <button type="button" aria-label={`Edit webhook ${h.url}`} onClick={() => setEditing(h)}>
                    Edit
                  </button>
                  <button
                    type="button"
                    aria-label={`Rotate secret of ${h.url}`}
                    onClick={() => setRotating(h)}
                  >
                    Rotate secret
                  </button>
                  <button
                    type="button"
                    aria-label={`${h.enabled ? 'Disable' : 'Enable'} ${h.url}`}
                    onClick={() => toggle(h)}
                  >
                    {h.enabled ? 'Disable' : 'Enable'}
                  </button>
                  <button
                    type="button"
                    class="danger"
                    aria-label={`Delete ${h.url}`}
                    onClick={() => remove(h)}
                  >
                    Delete
                  </button>
                </div>
              ),
            },
          ]}
        />
      )}
      {selectedHook && <DeliveryLog hook={selectedHook} version={logVersion} />}
      {dialog}
    </section>
  );
}

function DeliveryLog({ hook, version }: { hook: Webhook; version: number }) {
  const api = currentSession().api;
  const [page, setPage] = useState(1);
  const { error, attempt } = useAttempt();
  const log = useLoad(
    () =>
      unwrap(
        api.GET('/v1/webhooks/{id}/deliveries', {
          params: { path: { id: hook.id }, query: { page, limit: 20 } },
        }),
      ),
    [hook.id, page, version],
  );
  const redeliver = (delivery: Delivery) =>
    attempt(async () => {
      await unwrap(
        api.POST('/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver', {
          params: { path: { id: hook.id, delivery_id: delivery.id } },
        }),
      );
      log.reload();
    });
  const rows = log.data?.data ?? [];
  return (
    <section aria-labelledby="delivery-log-title">
      <div class="page-head">
        <h2 id="delivery-log-title">Deliveries to {hook.url}</h2>
        <button type="button" onClick={log.reload}>
          Refresh
        </button>
      </div>
      <ErrorNotice error={error ?? log.error} />
      {log.data && rows.length === 0 ? (
        <EmptyState title="No deliveries yet">
          <p>
            Events this webhook takes are delivered as they happen; use Send test to try the receiver now.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption={`Deliveries to ${hook.url}`}
          rows={rows}
          rowKey={(d) => d.id}
          columns={[
            { label: 'Event', render: (d) => d.event_type },
            { label: 'Status', render: (d) => <StatusBadge status={d.status} /> },
            { label: 'Attempts', render: (d) => d.attempts },
            {
              label: 'Answer',
              render: (d) =>
                d.last_status_code
                  ? `HTTP ${d.last_status_code}`
                  : (d.last_error ?? (d.status === 'pending' ? 'waiting' : '—')),
            },
            { label: 'Next attempt', render: (d) => formatDate(d.next_attempt_at) },
            { label: 'Created', render: (d) => formatDate(d.created_at) },
            {
              label: 'Actions',
              render: (d) => (
                <button
                  type="button"
                  aria-label={`Redeliver ${d.event_type} ${d.id}`}
                  onClick={() => redeliver(d)}
                >
                  Redeliver
                </button>
              ),
            },
          ]}
        />
      )}
      {log.data && <Pager page={page} totalPages={log.data.pagination.total_pages} onPage={setPage} />}
    </section>
  );
}

/** How long the previous secret keeps signing, from a rotation's answer. */
function overlapNote(previousUntil: string | null): string {
  return previousUntil
    ? `Until ${formatDate(previousUntil)} each delivery is signed with both the previous and the new secret, so your receiver can switch over; after that only the new one signs.`
    : 'The previous secret no longer signs anything.';
}

/** The generated signing secret, once: the API never returns it again. */
function NewSecret({ url, secret, rotation, onDone }: FreshSecret & { onDone: () => void }) {
  return (
    <SecretOnce
      title={rotation ? 'Your rotated webhook signing secret' : 'Your webhook signing secret'}
      label={rotation ? 'New signing secret' : 'Signing secret'}
      copyLabel="Copy secret"
      secret={secret}
      onDone={onDone}
    >
      <p>
        <strong>Copy the signing secret of {url} now: it will not be shown again.</strong>
      </p>
      {rotation && <p>{overlapNote(rotation.previous_secret_expires_at)}</p>}
    </SecretOnce>
  );
}

/** Rotate a subscription's signing secret: generated (shown once) or given, with an overlap. */
function RotateSecretForm(props: {
  hook: Webhook;
  onCancel: () => void;
  onRotated: (answer: Rotated) => void;
}) {
  const [hours, setHours] = useState('24');
  const [secret, setSecret] = useState('');
  const submit = async () => {
    const answer = await unwrap(
      currentSession().api.POST('/v1/webhooks/{id}/rotate-secret', {
        params: { path: { id: props.hook.id } },
        body: {
          overlap_seconds: Math.round(Number(hours) * 3600),
          ...(secret.trim() ? { secret: secret.trim() } : {}),
        },
      }),
    );
    props.onRotated(answer.data);
  };
  return (
    <FormDialog
      modal
      title={`Rotate the signing secret of ${props.hook.url}`}
      submitLabel="Rotate secret"
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField
        label="Overlap (hours)"
        type="number"
        min={0}
        max={MAX_OVERLAP_HOURS}
        step="any"
        required
        hint={`How long the previous secret keeps signing beside the new one (at most ${MAX_OVERLAP_HOURS} hours), so your receiver can switch over without refusing deliveries. 0 retires it at once.`}
        value={hours}
        onValue={setHours}
      />
      <TextField
        label="Your own secret (optional)"
        type="password"
        autocomplete="off"
        minLength={16}
        maxLength={256}
        hint="At least 16 characters. Empty: Nimbus generates one and shows it once."
        value={secret}
        onValue={setSecret}
      />
    </FormDialog>
  );
}

/**
 * Create a webhook (inline, `hook` absent) or edit one (a modal opened from its row, pre-filled, sending
 * only what changed). The events offered are the API's event families, and any single types the
 * subscription already names.
 */
function WebhookForm(props: {
  hook?: Webhook;
  onCancel: () => void;
  onSaved: (url: string, secret: string | undefined) => void;
}) {
  const { hook } = props;
  const types = useLoad(
    async () => (await unwrap(currentSession().api.GET('/v1/events/types'))).data.map((t) => t.type),
    [],
  );
  const [initial] = useState(() => (hook ? webhookDraftOf(hook) : NEW_WEBHOOK));
  const [draft, setDraft] = useState(initial);
  const set = (change: Partial<WebhookDraft>) => setDraft({ ...draft, ...change });
  const choices = [
    ...new Set([...(types.data ?? []).map((type) => `${type.split('.')[0]}.*`), ...initial.events]),
  ];

  const submit = async () => {
    const api = currentSession().api;
    if (!hook) {
      const answer = await unwrap(api.POST('/v1/webhooks', { body: createBody(draft) }));
      props.onSaved(answer.data.url, answer.data.secret);
      return;
    }
    const body = patchBody(initial, draft);
    // Nothing changed: the API would refuse an empty PATCH, and there is nothing to save.
    if (Object.keys(body).length > 0)
      await unwrap(api.PATCH('/v1/webhooks/{id}', { params: { path: { id: hook.id } }, body }));
    props.onSaved(draft.url, undefined);
  };

  return (
    <FormDialog
      title={hook ? `Edit webhook ${hook.url}` : 'Create webhook'}
      submitLabel={hook ? 'Save' : 'Create'}
      modal={Boolean(hook)}
      canSubmit={draft.everything || draft.events.length > 0}
      error={types.error}
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField
        label="Receiver URL"
        type="url"
        required
        placeholder="https://example.com/nimbus-events"
        value={draft.url}
        onValue={(url) => set({ url })}
      />
      <TextField
        label="Description (optional)"
        value={draft.description}
        onValue={(description) => set({ description })}
      />
      <fieldset>
        <legend>Events</legend>
        <label class="check">
          <input
            type="checkbox"
            checked={draft.everything}
            onChange={(e) => set({ everything: e.currentTarget.checked })}
          />
          Every event (*)
        </label>
        {!draft.everything && (
          <div class="permission-grid">
            {choices.map((choice) => (
              <label key={choice} class="check">
                <input
                  type="checkbox"
                  checked={draft.events.includes(choice)}
                  onChange={(e) =>
                    set({
                      events: e.currentTarget.checked
                        ? [...draft.events, choice]
                        : draft.events.filter((x) => x !== choice),
                    })
                  }
                />
                {choice}
              </label>
            ))}
          </div>
        )}
      </fieldset>
    </FormDialog>
  );
}
