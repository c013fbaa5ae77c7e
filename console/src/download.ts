/**
 * Saves a file the API serves (invoice PDF, CSV) as the browser's download. A plain link cannot send the
 * key (it lives in sessionStorage, never in a URL or cookie), so the file is fetched with the
 * Authorization header and handed to an <a download> through a Blob URL; the CSP needs nothing for it.
 */
import { ApiError } from './api.ts';
import { currentSession } from './session.ts';

export async function downloadFile(apiPath: string, fallbackName: string): Promise<void> {
  const { apiKey } = currentSession();
  let response: Response;
  try {
    response = await fetch(apiPath, { headers: { authorization: `Bearer ${apiKey}` } });
  } catch (error) {
    throw new ApiError(0, 'network', `The server could not be reached: ${(error as Error).message}`, null);
  }
  if (!response.ok) {
    const envelope = (await response.json().catch(() => null)) as {
      error?: { code?: string; message?: string };
      metadata?: { request_id?: string };
    } | null;
    throw new ApiError(
      response.status,
      envelope?.error?.code ?? 'http_error',
      envelope?.error?.message ?? `The server answered ${response.status}`,
      envelope?.metadata?.request_id ?? response.headers.get('x-request-id'),
    );
  }
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = fileNameOf(response.headers.get('content-disposition')) ?? fallbackName;
  document.body.append(link);
  link.click();
  link.remove();
  // The click has started the download; the URL can go once the browser has read it.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** The filename of `Content-Disposition: attachment; filename="…"`. */
function fileNameOf(disposition: string | null): string | null {
  const match = disposition?.match(/filename="([^"]+)"/);
  return match?.[1] ?? null;
}
