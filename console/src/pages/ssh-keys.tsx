/**
 * Settings → SSH Keys: the account's public keys (GET /v1/ssh-keys) with their fingerprints, Add SSH key
 * by pasting one OpenSSH line (the API checks it and says what is wrong), delete after a confirmation.
 */
import { useState } from 'preact/hooks';
import { type Schemas, unwrap } from '../api.ts';
import { useConfirm } from '../components/confirm-dialog.tsx';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { TextAreaField, TextField } from '../components/field.tsx';
import { FormDialog } from '../components/form-dialog.tsx';
import { Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { useAttempt } from '../use-attempt.ts';
import './account-billing.css';

type SshKey = Schemas['SshKey'];

export function SshKeysPanel() {
  const api = currentSession().api;
  const keys = useLoad(
    async () => (await unwrap(api.GET('/v1/ssh-keys', { params: { query: { limit: 100 } } }))).data,
    [],
  );
  const [adding, setAdding] = useState(false);
  const { error, attempt } = useAttempt();
  const { ask, dialog } = useConfirm();

  const remove = (key: SshKey) =>
    ask(
      `Delete the SSH key ${key.name}?`,
      'New instances can no longer be given it. Instances created with it keep it.',
      'Delete',
      () =>
        attempt(async () => {
          await unwrap(api.DELETE('/v1/ssh-keys/{id}', { params: { path: { id: key.id } } }));
          keys.reload();
        }),
    );

  return (
    <>
      <div class="page-head">
        <h2>SSH Keys</h2>
        <button type="button" class="primary" onClick={() => setAdding(true)}>
          Add SSH key
        </button>
      </div>
      {adding && (
        <AddKeyForm
          onCancel={() => setAdding(false)}
          onAdded={() => {
            setAdding(false);
            keys.reload();
          }}
        />
      )}
      <ErrorNotice error={error ?? keys.error} />
      {keys.data && keys.data.length === 0 ? (
        <EmptyState title="No SSH keys">
          <p>
            Add your public key (the one line of <code>~/.ssh/id_ed25519.pub</code>) to log in to new
            instances with it.
          </p>
        </EmptyState>
      ) : (
        <Table
          caption="SSH keys"
          rows={keys.data ?? []}
          rowKey={(k) => k.id}
          columns={[
            { label: 'Name', render: (k) => k.name },
            { label: 'Fingerprint', render: (k) => <code>{k.fingerprint}</code> },
            { label: 'Type', render: (k) => k.public_key.split(' ')[0] },
            { label: 'Added', render: (k) => formatDate(k.created_at) },
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

function AddKeyForm(props: { onCancel: () => void; onAdded: () => void }) {
  const [name, setName] = useState('');
  const [publicKey, setPublicKey] = useState('');

  const submit = async () => {
    await unwrap(currentSession().api.POST('/v1/ssh-keys', { body: { name, public_key: publicKey.trim() } }));
    props.onAdded();
  };

  return (
    <FormDialog title="Add SSH key" submitLabel="Add key" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Key name" required value={name} onValue={setName} />
      <TextAreaField
        label="Public key"
        class="key-text"
        required
        placeholder="ssh-ed25519 AAAA… you@laptop"
        hint="One OpenSSH line: ssh-ed25519, ssh-rsa (2048 bits or more) or ecdsa-sha2-nistp256/384/521. Never paste a private key."
        value={publicKey}
        onValue={setPublicKey}
      />
    </FormDialog>
  );
}
