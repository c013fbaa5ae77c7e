/**
 * A real SMTP relay for the alert suites and benchmark: the `smtp-server` package listening on a local
 * port, every accepted message parsed with `mailparser` and kept with the time the relay accepted it.
 * Plain SMTP (STARTTLS hidden, so a client does not try to upgrade to a certificate it cannot check) or
 * implicit TLS with a self-signed certificate and a user and password (`smtps://user:pass@…`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { loadOrCreateTls } from '../../src/platform/http/tls.js';

export interface AcceptedMail {
  mail: ParsedMail;
  /** The envelope's recipients (RCPT TO). */
  to: string[];
  /** Date.now() when the relay accepted the message (after DATA). */
  acceptedAt: number;
}

export interface SmtpRelay {
  /** For NIMBUS_SMTP_URL. */
  url: string;
  /** The relay's certificate (TLS mode), for NIMBUS_SMTP_CA_FILE. */
  caFile: string | null;
  accepted: AcceptedMail[];
  /** Messages to one address. */
  to(address: string): AcceptedMail[];
  /** Recipients refused with a 550 from now on (a relay that does not take an address). */
  refuse(address: string, refused: boolean): void;
  /** Holds each DATA this long before accepting it (a slow relay). */
  delayData(ms: number): void;
  /** Messages whose DATA arrived and that are not accepted yet (held by delayData). */
  held(): number;
  close(): Promise<void>;
}

export async function startSmtpRelay(
  options: { tls?: { user: string; password: string } } = {},
): Promise<SmtpRelay> {
  const accepted: AcceptedMail[] = [];
  const refused = new Set<string>();
  let dataDelayMs = 0;
  let holding = 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-smtp-'));
  const tls = options.tls ? await loadOrCreateTls({ dataDir: dir, files: null, host: '127.0.0.1' }) : null;
  const server = new SMTPServer({
    ...(tls && options.tls
      ? {
          secure: true,
          key: tls.key,
          cert: tls.cert,
          onAuth(auth, _session, callback) {
            const ok = auth.username === options.tls?.user && auth.password === options.tls?.password;
            callback(
              ok ? null : new Error('Invalid username or password'),
              ok ? { user: auth.username } : undefined,
            );
          },
        }
      : { authOptional: true, hideSTARTTLS: true, disabledCommands: ['AUTH'] }),
    logger: false,
    onRcptTo(address, _session, callback) {
      if (refused.has(address.address.toLowerCase())) {
        const error = new Error(`5.1.1 <${address.address}>: mailbox unavailable`) as Error & {
          responseCode: number;
        };
        error.responseCode = 550;
        callback(error);
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      const to = session.envelope.rcptTo.map((r) => r.address);
      holding += 1;
      simpleParser(stream)
        .then(async (mail) => {
          if (dataDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, dataDelayMs));
          accepted.push({ mail, to, acceptedAt: Date.now() });
          callback();
        })
        .catch((error: Error) => callback(error))
        .finally(() => {
          holding -= 1;
        });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as { port: number };
  const url = options.tls
    ? `smtps://${encodeURIComponent(options.tls.user)}:${encodeURIComponent(options.tls.password)}@127.0.0.1:${port}`
    : `smtp://127.0.0.1:${port}`;
  return {
    url,
    caFile: tls?.certFile ?? null,
    accepted,
    to: (address) => accepted.filter((m) => m.to.map((a) => a.toLowerCase()).includes(address.toLowerCase())),
    refuse: (address, on) => {
      if (on) refused.add(address.toLowerCase());
      else refused.delete(address.toLowerCase());
    },
    delayData: (ms) => {
      dataDelayMs = ms;
    },
    held: () => holding,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
