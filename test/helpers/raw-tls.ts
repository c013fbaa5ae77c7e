/**
 * Talking HTTP over a bare TLS socket, for what a well-behaved client library will not send: malformed
 * request lines, oversized headers, bodies written in full before the answer is read.
 */
import tls from 'node:tls';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: any;
  /** Everything the server sent. */
  text: string;
  /** The socket error that ended the exchange, if one did (ECONNRESET, EPIPE …). */
  error: string | null;
}

export function parseAnswer(text: string, error: string | null = null): RawAnswer {
  const split = text.indexOf('\r\n\r\n');
  const head = split === -1 ? text : text.slice(0, split);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rawBody = split === -1 ? '' : text.slice(split + 4);
  let body: unknown = rawBody;
  try {
    body = rawBody.length > 0 ? JSON.parse(rawBody) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body, text, error };
}

/**
 * Sends `parts` one after another (each once the previous is handed to the kernel) and reads only once
 * all are sent, as many clients do; resolves with what came back when the server closes.
 */
export function rawExchange(
  url: string,
  ca: Buffer,
  parts: (string | Buffer)[],
  { readWhileSending = false }: { readWhileSending?: boolean } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const collect = (chunk: Buffer) => chunks.push(chunk);
    const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () => {
      let index = 0;
      const next = () => {
        if (socket.destroyed) return;
        const part = parts[index++];
        if (part === undefined) {
          if (!readWhileSending) socket.on('data', collect);
          return;
        }
        socket.write(part, () => setImmediate(next));
      };
      next();
    });
    if (readWhileSending) socket.on('data', collect);
    let error: string | null = null;
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
    });
    socket.on('close', () => resolve(parseAnswer(Buffer.concat(chunks).toString('utf8'), error)));
  });
}

/** A request's bytes in pieces of `size`, so the socket writes it over many calls. */
export function inPieces(bytes: Buffer, size: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let offset = 0; offset < bytes.length; offset += size)
    pieces.push(bytes.subarray(offset, offset + size));
  return pieces;
}
