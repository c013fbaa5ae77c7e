/**
 * Fakes for the console's component tests (vitest project `console`): a WebSocket the test plays the
 * server's side of, and a fetch that answers from a route table.
 */

/** A WebSocket the test answers for the server (the console's live stream, live.ts). */

export class FakeSocket {
  static made: FakeSocket[] = [];
  /** The statuses the server says it read when it confirms a subscription. */
  static statuses: Record<string, string> = {};
  readonly sent: Record<string, unknown>[] = [];
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  closedByClient = false;

  constructor(readonly url: string) {
    FakeSocket.made.push(this);
  }
  send(data: string): void {
    const message = JSON.parse(data) as Record<string, unknown>;
    this.sent.push(message);
    // The server confirms a subscription with the statuses it read.
    if (message.type === 'subscribe') {
      this.deliver({
        type: 'subscribed',
        interval: 60,
        instances: message.instances,
        statuses: FakeSocket.statuses,
      });
    }
  }
  close(): void {
    this.closedByClient = true;
  }
  /** The server admits the key. */
  admit(): void {
    this.onopen?.({});
    this.deliver({ type: 'ready', interval: 5, instances: [], statuses: {} });
  }
  deliver(message: Record<string, unknown>): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
  drop(code = 1006, reason = ''): void {
    this.onclose?.({ code, reason });
  }
}

export type Route = (url: URL, request: Request) => unknown | Promise<unknown>;

/**
 * A fetch for openapi-fetch (stub it before signIn(), which makes the client): each path's route gives
 * the JSON body of a 200 answer; a path without one answers 404 in the API's envelope. `requests` keeps
 * the path and query of each request, in order.
 */
export function fakeFetch(routes: Record<string, Route>) {
  const requests: string[] = [];
  const fetch = async (input: Request | string): Promise<Response> => {
    const request = input instanceof Request ? input : new Request(input);
    const url = new URL(request.url);
    requests.push(`${url.pathname}${url.search}`);
    const route = routes[url.pathname];
    if (!route) {
      return new Response(JSON.stringify({ error: { code: 'not_found', message: url.pathname } }), {
        status: 404,
        headers: { 'content-type': 'application/json' },
      });
    }
    const body = await route(url, request);
    return new Response(JSON.stringify(body), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  };
  return { fetch, requests };
}
