/**
 * What `nimbus login` needs to know about a server's certificate before sending it a key: whether this
 * machine already trusts it (system CAs, plus NIMBUS_CA_FILE), and if not, why, and its SHA-256
 * fingerprint for the user to compare with the server's own
 * (`openssl x509 -in data/tls/cert.pem -noout -fingerprint -sha256`).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import tls from 'node:tls';

export interface ServerCertificate {
  /** Verified against the trusted CAs, host name included. */
  trusted: boolean;
  /** Why not (Node's code, e.g. DEPTH_ZERO_SELF_SIGNED_CERT), or null. */
  reason: string | null;
  selfSigned: boolean;
  fingerprint: string;
  subject: string;
  validTo: string;
}

export function probeCertificate(
  url: string,
  env = process.env,
  timeoutMs = 10_000,
): Promise<ServerCertificate> {
  const { hostname, port } = new URL(url);
  const host = hostname.replace(/^\[|\]$/g, '');
  const ca = env.NIMBUS_CA_FILE
    ? [...tls.rootCertificates, readFileSync(env.NIMBUS_CA_FILE, 'utf8')]
    : undefined;
  return new Promise((resolve, reject) => {
    // Nothing is sent on this connection: it ends as soon as the handshake shows the certificate.
    const socket = tls.connect({
      host,
      port: Number(port || 443),
      ...(isIP(host) ? {} : { servername: host }),
      ...(ca ? { ca } : {}),
      rejectUnauthorized: false,
      timeout: timeoutMs,
    });
    socket.once('timeout', () =>
      socket.destroy(new Error(`no TLS handshake with ${host}:${port} within ${timeoutMs} ms`)),
    );
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      const certificate = socket.getPeerCertificate();
      let reason: string | null = socket.authorized ? null : String(socket.authorizationError ?? 'unknown');
      // authorized covers the chain; the host name is checked separately, as an HTTPS client would.
      if (reason === null) {
        const mismatch = tls.checkServerIdentity(host, certificate);
        if (mismatch) reason = (mismatch as NodeJS.ErrnoException).code ?? mismatch.message;
      }
      const name = (entries: Record<string, unknown> | undefined) =>
        Object.entries(entries ?? {})
          .map(([key, value]) => `${key}=${value}`)
          .join(', ');
      resolve({
        trusted: reason === null,
        reason,
        selfSigned: reason === 'DEPTH_ZERO_SELF_SIGNED_CERT' || reason === 'SELF_SIGNED_CERT_IN_CHAIN',
        fingerprint: certificate.fingerprint256,
        subject: name(certificate.subject as unknown as Record<string, unknown>),
        validTo: certificate.valid_to,
      });
      socket.end();
    });
  });
}
