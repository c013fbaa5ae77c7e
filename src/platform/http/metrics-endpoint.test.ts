/** The metrics port's token check and the metadata port's address: pure rules. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { metadataHost } from '../../resources/instances/metadata-server.js';
import { carriesToken } from './metrics-endpoint.js';

describe('the metrics token', () => {
  const token = 'scrape-me-0123456789';

  it('accepts exactly "Bearer <token>"', () => {
    expect(carriesToken(`Bearer ${token}`, token)).toBe(true);
    expect(carriesToken(`bearer ${token}`, token)).toBe(true);
    for (const header of [undefined, '', 'Bearer', `Bearer ${token}x`, `Basic ${token}`, token, `Bearer  `]) {
      expect(carriesToken(header, token)).toBe(false);
    }
  });

  it('refuses any other token, and any header that is not a bearer token', () => {
    fc.assert(
      fc.property(fc.string(), (other) => {
        fc.pre(other.trim() !== token);
        expect(carriesToken(`Bearer ${other}`, token)).toBe(false);
        expect(carriesToken(other, token)).toBe(false);
      }),
    );
  });
});

describe('the metadata port listens on loopback only', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['127.0.0.2', '127.0.0.2'],
    ['::1', '::1'],
    ['localhost', 'localhost'],
    ['0.0.0.0', '127.0.0.1'],
    ['::', '127.0.0.1'],
    ['192.168.1.10', '127.0.0.1'],
    ['nimbus.example.net', '127.0.0.1'],
  ])('NIMBUS_HOST=%s: %s', (host, expected) => {
    expect(metadataHost(host)).toBe(expected);
  });
});
