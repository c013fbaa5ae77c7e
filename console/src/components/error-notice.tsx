/** An API error as the user sees it: the API's message, and the request id to quote to support. */
import { ApiError } from '../api.ts';

export function ErrorNotice({ error }: { error: unknown }) {
  if (error === null || error === undefined) return null;
  const message = error instanceof Error ? error.message : String(error);
  const requestId = error instanceof ApiError ? error.requestId : null;
  return (
    <div class="notice notice-error" role="alert">
      <p>{message}</p>
      {requestId && (
        <p class="muted">
          Request id: <code>{requestId}</code>
        </p>
      )}
    </div>
  );
}
