import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { sendRequest, serverForSuite } from './helpers/server.js';

describe.each(STORES)('transport and envelope (%s)', (store) => {
  const server = serverForSuite({ store });

  it('serves HTTPS with HSTS, a request id and the success envelope', async () => {
    const reply = await server.request('GET', '/v1/account', { key: server.rootKey });
    expect(reply.status).toBe(200);
    expect(reply.headers['strict-transport-security']).toMatch(/max-age=\d+/);
    expect(reply.headers['x-request-id']).toMatch(/^req_/);
    expect(reply.body).toMatchObject({
      success: true,
      data: { plan: 'enterprise', status: 'active' },
      metadata: { request_id: reply.headers['x-request-id'] },
    });
    expect(new Date(reply.body.metadata.timestamp).toISOString()).toBe(reply.body.metadata.timestamp);
  });

  it('rejects plain HTTP with 400 in the envelope and never authenticates it', async () => {
    const anonymous = await sendRequest(server.httpUrl!, null, 'GET', '/v1/account');
    expect(anonymous.status).toBe(400);
    expect(anonymous.body.error.code).toBe('invalid_request');
    expect(anonymous.body.error.message).toMatch(/HTTPS is required/);
    expect(anonymous.headers['strict-transport-security']).toBeUndefined();
    // Counted on the client address's budget (the Free plan's numbers), as every keyless answer is.
    expect(anonymous.headers['x-ratelimit-limit']).toBe('1000');

    const withKey = await sendRequest(server.httpUrl!, null, 'GET', '/v1/account', { key: server.rootKey });
    expect(withKey.status).toBe(400);
    // The key is never looked at: the budget is still the address's, not the enterprise account's.
    expect(withKey.headers['x-ratelimit-limit']).toBe('1000');
    expect(withKey.body.error.message).toMatch(/rotate/);
    expect(withKey.text).not.toContain(server.rootKey);
    expect(withKey.body.data).toBeUndefined();
  });
});
