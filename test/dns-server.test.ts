/**
 * The DNS server on NIMBUS_DNS_PORT (docs/api.md, "DNS"), asked over real UDP and TCP sockets, and through
 * `dig`, about instances made and deleted through the HTTPS API.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { waitFor } from './helpers/common.js';
import { type Answer, answerData, ask, dig, USE_DIG } from './helpers/dns.js';
import { createInstance } from './helpers/instances.js';
import { freePort, serverForSuite } from './helpers/server.js';

const DOMAIN = 'cloud.test';
const REGION = 'us-east-1';
/** us-east-1's default public pool is 203.0.113.0/24, so its reverse zone is this. */
const REVERSE_ZONE = '113.0.203.in-addr.arpa';
const TRANSPORTS = ['udp', 'tcp'] as const;
const PORTS = { sqlite: await freePort(), postgres: await freePort() };

const reverseName = (ip: string) => `${ip.split('.').reverse().join('.')}.in-addr.arpa`;
const soaOwner = (answer: Answer) =>
  (answer.authorities ?? []).filter((record) => record.type === 'SOA').map((record) => record.name);

describe.each(STORES)('DNS server (%s)', (store) => {
  const port = PORTS[store];
  const server = serverForSuite({
    store,
    env: { NIMBUS_DNS_PORT: String(port), NIMBUS_PUBLIC_DOMAIN: DOMAIN },
  });

  it.each(TRANSPORTS)(
    "answers A with an instance's public IP, as its authority, over %s",
    async (transport) => {
      const instance = await createInstance(server, server.rootKey);
      expect(instance.hostname).toBe(`${instance.id}.${REGION}.${DOMAIN}`);
      const answer = await ask(port, { name: instance.hostname, type: 'A' }, transport);
      expect(answer.rcode).toBe('NOERROR');
      expect(answer.flag_aa).toBe(true);
      expect(answer.flag_ra).toBe(false);
      expect(answer.answers).toEqual([
        expect.objectContaining({ name: instance.hostname, type: 'A', ttl: 60, data: instance.public_ip }),
      ]);
      // Names compare without case, and the question comes back as it was asked.
      const shouted = await ask(port, { name: instance.hostname.toUpperCase(), edns: true }, transport);
      expect(answerData(shouted, 'A')).toEqual([instance.public_ip]);
      expect(shouted.questions?.[0]?.name).toBe(instance.hostname.toUpperCase());
    },
  );

  it.each(TRANSPORTS)(
    "answers PTR for an instance's public IP with its hostname, over %s",
    async (transport) => {
      const instance = await createInstance(server, server.rootKey);
      const answer = await ask(port, { name: reverseName(instance.public_ip), type: 'PTR' }, transport);
      expect(answer.rcode).toBe('NOERROR');
      expect(answer.flag_aa).toBe(true);
      expect(answerData(answer, 'PTR')).toEqual([instance.hostname]);
    },
  );

  it('answers SOA and NS at the apex, and NXDOMAIN with the SOA for a name that is not there', async () => {
    const soa = await ask(port, { name: DOMAIN, type: 'SOA' });
    expect(soa.rcode).toBe('NOERROR');
    expect(soa.flag_aa).toBe(true);
    expect(soa.answers?.[0]).toMatchObject({
      type: 'SOA',
      name: DOMAIN,
      data: { mname: `ns1.${DOMAIN}`, rname: `hostmaster.${DOMAIN}`, minimum: 60 },
    });
    expect(answerData(await ask(port, { name: DOMAIN, type: 'NS' }), 'NS')).toEqual([`ns1.${DOMAIN}`]);
    // The test server binds 127.0.0.1, so that is the name server's address.
    expect(answerData(await ask(port, { name: `ns1.${DOMAIN}` }), 'A')).toEqual(['127.0.0.1']);

    for (const name of [
      `ins_00000000000000000000000000.${REGION}.${DOMAIN}`,
      `no-such-name.${REGION}.${DOMAIN}`,
      `www.${DOMAIN}`,
      `a.b.${REGION}.${DOMAIN}`,
      `host.nowhere-1.${DOMAIN}`,
    ]) {
      const answer = await ask(port, { name, type: 'A' });
      expect(answer.rcode, name).toBe('NXDOMAIN');
      expect(answer.flag_aa, name).toBe(true);
      expect(answer.answers, name).toEqual([]);
      expect(soaOwner(answer), name).toEqual([DOMAIN]);
    }
    // A region exists (its instances are below it) but holds no record: NOERROR, no answer, the SOA.
    const region = await ask(port, { name: `${REGION}.${DOMAIN}`, type: 'A' });
    expect(region.rcode).toBe('NOERROR');
    expect(region.answers).toEqual([]);
    expect(soaOwner(region)).toEqual([DOMAIN]);
    // An address of the pool that no instance holds.
    const unheld = await ask(port, { name: reverseName('203.0.113.254'), type: 'PTR' });
    expect(unheld.rcode).toBe('NXDOMAIN');
    expect(soaOwner(unheld)).toEqual([REVERSE_ZONE]);
  });

  it('refuses names outside its zones, and never recurses', async () => {
    for (const name of ['example.com', `${DOMAIN}.example.com`, reverseName('8.8.8.8'), '.']) {
      const answer = await ask(port, { name, type: 'A' });
      expect(answer.rcode, name).toBe('REFUSED');
      expect(answer.flag_ra, name).toBe(false);
      expect(answer.answers, name).toEqual([]);
    }
    // Zone transfers are not offered either.
    expect((await ask(port, { name: DOMAIN, type: 'AXFR' }, 'tcp')).rcode).toBe('REFUSED');
  });

  it('answers a name only while one instance of the region has it, across accounts', async () => {
    const other = await server.createAccount();
    const name = `web-${store}-${Date.now()}`;
    const hostname = `${name}.${REGION}.${DOMAIN}`;
    const mine = await createInstance(server, server.rootKey, { name });
    expect(answerData(await ask(port, { name: hostname }), 'A')).toEqual([mine.public_ip]);

    const theirs = await createInstance(server, other.key, { name });
    const shared = await ask(port, { name: hostname });
    expect(shared.rcode).toBe('NXDOMAIN');
    // Ids still answer, whatever the names.
    expect(answerData(await ask(port, { name: theirs.hostname }), 'A')).toEqual([theirs.public_ip]);

    expect((await server.request('DELETE', `/v1/instances/${mine.id}`, { key: server.rootKey })).status).toBe(
      202,
    );
    expect(answerData(await ask(port, { name: hostname }), 'A')).toEqual([theirs.public_ip]);
    // A name that is not a lower-case hostname label is not served.
    const upper = await createInstance(server, server.rootKey, { name: `Web_${Date.now()}` });
    expect((await ask(port, { name: `${upper.name}.${REGION}.${DOMAIN}` })).rcode).toBe('NXDOMAIN');
  });

  it('stops answering for an instance within 2 s of its delete', async () => {
    const instance = await createInstance(server, server.rootKey);
    expect(answerData(await ask(port, { name: instance.hostname }), 'A')).toEqual([instance.public_ip]);
    const deleted = await server.request('DELETE', `/v1/instances/${instance.id}`, { key: server.rootKey });
    expect(deleted.status).toBe(202);
    const started = Date.now();
    await waitFor(
      'the name and the address to be forgotten',
      async () => {
        const forward = await ask(port, { name: instance.hostname });
        const reverse = await ask(port, { name: reverseName(instance.public_ip), type: 'PTR' });
        return forward.rcode === 'NXDOMAIN' && reverse.rcode === 'NXDOMAIN' ? true : undefined;
      },
      { timeoutMs: 2000 },
    );
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it.runIf(USE_DIG)('answers dig: A, PTR, SOA, NXDOMAIN and REFUSED, over UDP and TCP', async () => {
    const instance = await createInstance(server, server.rootKey);
    for (const transport of [[], ['+tcp']]) {
      const a = await dig(port, instance.hostname, 'A', transport);
      expect(a.status).toBe('NOERROR');
      expect(a.flags).toContain('aa');
      expect(a.flags).not.toContain('ra');
      expect(a.answers).toEqual([[`${instance.hostname}.`, '60', 'IN', 'A', instance.public_ip]]);

      const ptr = await dig(port, reverseName(instance.public_ip), 'PTR', transport);
      expect(ptr.answers.map((record) => record.slice(3))).toContainEqual(['PTR', `${instance.hostname}.`]);

      const soa = await dig(port, DOMAIN, 'SOA', transport);
      expect(soa.answers[0]?.slice(0, 5)).toEqual([`${DOMAIN}.`, '60', 'IN', 'SOA', `ns1.${DOMAIN}.`]);

      const missing = await dig(port, `nothing.${REGION}.${DOMAIN}`, 'A', transport);
      expect(missing.status).toBe('NXDOMAIN');
      expect(missing.authorities[0]?.slice(0, 4)).toEqual([`${DOMAIN}.`, '60', 'IN', 'SOA']);

      expect((await dig(port, 'example.com', 'A', transport)).status).toBe('REFUSED');
    }
  });
});
