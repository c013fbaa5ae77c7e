/**
 * Sign-in: the key is checked against GET /v1/account before it is kept, so a bad key shows the API's
 * own error message and is never stored.
 */
import { useState } from 'preact/hooks';
import { createApi, unwrap } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { TextField } from '../components/field.tsx';
import { signIn, signOutReason } from '../session.ts';
import { useSignal } from '../signal.ts';
import { useAttempt } from '../use-attempt.ts';

export function SignInPage() {
  const [apiKey, setApiKey] = useState('');
  const { error, busy, attempt } = useAttempt();
  const reason = useSignal(signOutReason);

  const submit = (event: Event) => {
    event.preventDefault();
    void attempt(async () => {
      await unwrap(createApi(apiKey.trim()).GET('/v1/account'));
      signIn(apiKey.trim());
    });
  };

  return (
    <main id="main" class="sign-in">
      <h1>Nimbus console</h1>
      {reason && (
        <div class="notice" role="status">
          <p>{reason}</p>
        </div>
      )}
      <form onSubmit={submit}>
        <TextField
          label="API key"
          type="password"
          autocomplete="off"
          required
          hint="Paste a key (nmb_…). A new server prints its bootstrap key on first start and keeps it in its data directory. The key stays in this tab only."
          value={apiKey}
          onValue={setApiKey}
        />
        <ErrorNotice error={error} />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
