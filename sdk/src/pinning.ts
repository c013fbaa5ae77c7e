/**
 * Certificate pinning: a TLS connector that accepts exactly one server certificate, named by its SHA-256
 * fingerprint, whoever signed it. A self-signed server (the default of `nimbus serve`) has no chain to
 * verify; a user who compared its fingerprint once (`nimbus login` shows it) can pin it instead, and any
 * other certificate, however valid, is refused before a request (and its API key) is sent.
 */
import type { TLSSocket } from 'node:tls';
import { buildConnector } from 'undici';
import { NimbusError } from './errors.js';

/** The server presented a certificate other than the pinned one. */
export class CertificateMismatchError extends NimbusError {
  override name = 'CertificateMismatchError';
  constructor(
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`The server's certificate fingerprint is ${actual}, not the trusted ${expected}`);
  }
}

/** `AB:CD:…` upper case with colons, from hex with or without colons, in any case. */
export function normalizeFingerprint(fingerprint: string): string {
  const hex = fingerprint
    .replace(/^sha256:/i, '')
    .replace(/[:\s]/g, '')
    .toUpperCase();
  if (!/^[0-9A-F]{64}$/.test(hex)) {
    throw new NimbusError(`"${fingerprint}" is not a SHA-256 fingerprint (64 hex digits, colons allowed)`);
  }
  return hex.match(/../g)!.join(':');
}

export function pinnedConnector(fingerprint: string): buildConnector.connector {
  const expected = normalizeFingerprint(fingerprint);
  // The chain is not verified (a self-signed certificate has none); the pin below is the whole check.
  // No TLS session is resumed: a resumed session shows no peer certificate (getPeerCertificate() is
  // empty), so the second connection of a client would be refused, or, checked less strictly, unchecked.
  const connect = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 0 });
  return (options, callback) => {
    connect(options, (error, socket) => {
      if (error !== null) {
        callback(error, null);
        return;
      }
      const actual = (socket as TLSSocket).getPeerCertificate().fingerprint256 ?? '';
      if (actual.toUpperCase() !== expected) {
        socket.destroy();
        callback(new CertificateMismatchError(expected, actual), null);
        return;
      }
      callback(null, socket);
    });
  };
}
