/**
 * Settings → API Keys (a panel of settings.tsx): the account's keys (GET /v1/account/api-keys) with last use and expiry, Create
 * API key (name, permissions, expiry; the secret shown once), and delete after a confirmation.
 */
import { useState } from 'preact/hooks';
import type { paths } from '../../../sdk/src/generated/v1.ts';
import { type ApiKey, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { SecretOnce } from '../components/secret-once.tsx';
import { Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';

type Permission = NonNullable<
  paths['/v1/account/api-keys']['post']['requestBody']['content']['application/json']['permissions']
>[number];
const AREAS = [
  'instances',
  'volumes',
  'snapshots',
  'networking',
  'monitoring',
  'billing',
  'account',
  'webhooks',
];

export function ApiKeysPanel() {
  const api = currentSession().api;
  const keys = useLoad(
    async () => (await unwrap(api.GET('/v1/account/api-keys', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();

  const remove = (key: ApiKey) =>
    ask(`Delete the key ${key.name}?`, 'Programs using it are refused from now on.', 'Delete', () =>
      attempt(async () => {
        await unwrap(api.DELETE('/v1/account/api-keys/{id}', { params: { path: { id: key.id } } }));
        keys.reload();
      }),
    );

  return (
    <>
      <div class="page-head">
        <h2>API Keys</h2>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create API key
        </button>
      </div>
      {created && (
        <SecretOnce
          title="Your new API key"
          label="New API key"
          copyLabel="Copy key"
          secret={created.key}
          onDone={() => setCreated(null)}
        >
          <p>
            <strong>Copy the key {created.name} now: it will not be shown again.</strong>
          </p>
        </SecretOnce>
      )}
      {creating && (
        <CreateKeyForm
          onCancel={() => setCreating(false)}
          onCreated={(name, key) => {
            setCreating(false);
            setCreated({ name, key });
            keys.reload();
          }}
        />
      )}
      <ErrorNotice error={error ?? keys.error} />
      {keys.data && keys.data.length === 0 ? (
        <EmptyState title="No API keys">
          <p>
            Create a key for each program or person that calls the API, with only the permissions it needs.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="API keys"
          rows={keys.data ?? []}
          rowKey={(k) => k.id}
          columns={[
            { label: 'Name', render: (k) => k.name },
            { label: 'Prefix', render: (k) => <code>{k.prefix}…</code> },
            { label: 'Permissions', render: (k) => k.permissions.join(', ') },
            { label: 'Last used', render: (k) => (k.last_used_at ? formatDate(k.last_used_at) : 'never') },
            { label: 'Expires', render: (k) => (k.expires_at ? formatDate(k.expires_at) : 'never') },
            {
              label: 'Actions',
              render: (k) => (
                <button
                  type="button"
                  class="danger"
                  aria-label={`Delete ${k.name}`}
                  onClick={() => remove(k)}
                >
                  Delete
                </button>
              ),
            },
          ]}
        />
      )}
      {dialog}
    </>
  );
}

function CreateKeyForm(props: { onCancel: () => void; onCreated: (name: string, key: string) => void }) {
  const [name, setName] = useState('');
  const [everything, setEverything] = useState(true);
  const [permissions, setPermissions] = useState<Permission[]>([]);
  const [expiry, setExpiry] = useState('');

  const toggle = (permission: Permission, on: boolean) =>
    setPermissions(on ? [...permissions, permission] : permissions.filter((p) => p !== permission));

  const submit = async () => {
    const answer = await unwrap(
      currentSession().api.POST('/v1/account/api-keys', {
        body: {
          name,
          permissions: everything ? ['*'] : permissions,
          ...(expiry ? { expires_at: new Date(`${expiry}T23:59:59Z`).toISOString() } : {}),
        },
      }),
    );
    props.onCreated(answer.data.name, answer.data.key ?? '');
  };

  return (
    <FormDialog title="Create API key" submitLabel="Create key" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Name" required value={name} onValue={setName} />
      <fieldset>
        <legend>Permissions</legend>
        <label class="check">
          <input
            type="checkbox"
            checked={everything}
            onChange={(e) => setEverything(e.currentTarget.checked)}
          />
          Everything (*)
        </label>
        {!everything && (
          <div class="permission-grid">
            {AREAS.flatMap((area) =>
              (['read', 'write'] as const).map((access) => {
                const permission = `${area}:${access}` as Permission;
                return (
                  <label key={permission} class="check">
                    <input
                      type="checkbox"
                      checked={permissions.includes(permission)}
                      onChange={(e) => toggle(permission, e.currentTarget.checked)}
                    />
                    {permission}
                  </label>
                );
              }),
            )}
          </div>
        )}
      </fieldset>
      <TextField label="Expires on (optional)" type="date" value={expiry} onValue={setExpiry} />
    </FormDialog>
  );
}
