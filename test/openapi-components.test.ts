/**
 * Issue 30 item 6: openapi/v1.json writes each shared part once, under `components`, and `$ref`s it
 * everywhere else (src/platform/http/openapi-components.ts, docs/api.md "The OpenAPI document").
 *
 * - Every reference names a part of the document, in the section its place calls for, and following them
 *   all gives a finite document.
 * - Nothing shared is written out again inline: no header, no error answer, no schema or parameter equal
 *   to a component.
 * - /v2 points at the same components as /v1: a /v2 operation writes out only its operationId, summary,
 *   description and tags, and, where it pages by cursor, its page answer.
 * - What a client sees is what it saw before the document was organised so: every path, method,
 *   operationId, parameter, body and status, outlined (with the references followed) in
 *   test/__snapshots__/openapi-outline.txt, which was written from the document as it was before.
 *   A change to the API changes the outline: review it, then `npx vitest run -u test/openapi-components.test.ts`.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { dereferenced, lookUp } from './helpers/openapi-document.js';

const committedFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'openapi', 'v1.json');
const committed = JSON.parse(readFileSync(committedFile, 'utf8'));

type Json = Record<string, unknown>;

interface Operation {
  operationId?: string;
  parameters?: Json[];
  requestBody?: { required?: boolean; content?: Json };
  responses: Record<string, Json>;
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

function operationsOf(document: { paths: Record<string, Json> }) {
  return Object.entries(document.paths).flatMap(([pathName, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.has(method))
      .map(([method, operation]) => ({ method, path: pathName, operation: operation as Operation })),
  );
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** JSON text with sorted keys, so that equal parts compare equal whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    isObject(item) ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : 1))) : item,
  );
}

/** Every `$ref` in `node` with where it is, as JSON Pointer segments. */
function references(node: unknown, at: string[] = []): { ref: string; at: string[] }[] {
  if (Array.isArray(node)) return node.flatMap((item, index) => references(item, [...at, String(index)]));
  if (!isObject(node)) return [];
  if (typeof node.$ref === 'string') return [{ ref: node.$ref, at }];
  return Object.entries(node).flatMap(([key, value]) => references(value, [...at, key]));
}

/** The component section a reference found at `at` must point into. */
function sectionFor(at: string[]): string {
  const last = at.at(-1);
  const parent = at.at(-2);
  if (parent === 'responses' && at.length >= 2 && /^\d{3}$/.test(last ?? '')) return 'responses';
  if (last === 'requestBody') return 'requestBodies';
  if (parent === 'headers') return 'headers';
  if (parent === 'parameters') return 'parameters';
  return 'schemas';
}

/**
 * One line per operation: method, path, operationId, parameters (`!` when required), the body's media
 * types, and each status (with its media types unless JSON). Computed with every reference followed.
 */
function outline(document: { paths: Record<string, Json> }): string {
  const inline = dereferenced(document);
  return `${operationsOf(inline)
    .map(({ method, path: pathName, operation }) => {
      const parameters = (operation.parameters ?? []).map(
        (parameter) => `${parameter.in}:${parameter.name}${parameter.required ? '!' : ''}`,
      );
      const body = operation.requestBody
        ? [
            `body${operation.requestBody.required ? '!' : ''}:${Object.keys(operation.requestBody.content ?? {}).join(',')}`,
          ]
        : [];
      const statuses = Object.entries(operation.responses).map(([status, response]) => {
        const media = Object.keys((response.content as Json | undefined) ?? {}).join(',');
        return media === 'application/json' ? status : `${status}:${media || 'none'}`;
      });
      return [
        method.toUpperCase(),
        pathName,
        operation.operationId,
        ...parameters,
        ...body,
        '|',
        ...statuses,
      ].join(' ');
    })
    .join('\n')}\n`;
}

describe('openapi/v1.json: each shared part written once, under components', () => {
  it('is a document a person can read: at most 600 kB', () => {
    expect(statSync(committedFile).size).toBeLessThanOrEqual(600_000);
  });

  it('points every reference at a part of the document, in the section its place calls for', () => {
    const found = references(committed);
    expect(found.length).toBeGreaterThan(1000);
    for (const { ref, at } of found) {
      const where = `#/${at.join('/')}`;
      expect(ref, where).toMatch(new RegExp(`^#/components/${sectionFor(at)}/[A-Za-z0-9._-]+$`));
      expect(() => lookUp(committed, ref), where).not.toThrow();
    }
    // Following every reference ends: no part contains itself.
    expect(() => dereferenced(committed)).not.toThrow();
  });

  it('lists headers, answers, parameters, request bodies and schemas under components, and uses each', () => {
    const components = committed.components as Record<string, Json>;
    const sections = ['schemas', 'parameters', 'headers', 'responses', 'requestBodies'];
    for (const section of sections) {
      expect(Object.keys(components[section] ?? {}).length, section).toBeGreaterThan(0);
    }
    const used = new Set(references({ paths: committed.paths, components }).map(({ ref }) => ref));
    for (const section of sections) {
      for (const name of Object.keys(components[section]!)) {
        expect(used, `components.${section}.${name} is used`).toContain(`#/components/${section}/${name}`);
      }
    }
  });

  it('writes no header and no shared error answer inline in an operation', () => {
    const errorResponses = new Set(Object.values(committed.components.responses as Json).map(canonical));
    for (const { method, path: pathName, operation } of operationsOf(committed)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const where = `${method.toUpperCase()} ${pathName} ${status}`;
        if (typeof response.$ref === 'string') continue;
        expect(errorResponses.has(canonical(response)), `${where} repeats a component`).toBe(false);
        for (const [name, header] of Object.entries((response.headers as Json | undefined) ?? {})) {
          expect(header, `${where} header ${name}`).toEqual({
            $ref: expect.stringMatching(/^#\/components\/headers\//),
          });
        }
      }
    }
    // The rate-limit headers, once described on nearly every answer, are described once per variant
    // (always sent, or `-Optional`), under components.headers.
    const headerObjects: { description?: unknown }[] = [];
    const collect = (node: unknown) => {
      if (Array.isArray(node)) for (const item of node) collect(item);
      if (!isObject(node)) return;
      if ('schema' in node && 'required' in node && 'description' in node) headerObjects.push(node);
      for (const value of Object.values(node)) collect(value);
    };
    collect(committed);
    for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
      const { description } = committed.components.headers[name] as { description: string };
      expect(headerObjects.filter((header) => header.description === description).length, name).toBe(2);
    }
  });

  it('writes no schema, parameter, answer or request body again where it is a component', () => {
    const schemas = new Map(
      Object.entries(committed.components.schemas as Json).map(([name, schema]) => [canonical(schema), name]),
    );
    const parameters = new Map(
      Object.entries(committed.components.parameters as Json).map(([name, parameter]) => [
        canonical(parameter),
        name,
      ]),
    );
    const answers = new Map(
      Object.entries(committed.components.responses as Json).map(([name, answer]) => [
        canonical(answer),
        name,
      ]),
    );
    const bodies = new Map(
      Object.entries(committed.components.requestBodies as Json).map(([name, body]) => [
        canonical(body),
        name,
      ]),
    );
    const repeats: string[] = [];
    const visit = (node: unknown, at: string[], root: boolean) => {
      if (Array.isArray(node)) {
        for (const [index, item] of node.entries()) visit(item, [...at, String(index)], false);
      }
      if (!isObject(node)) return;
      const text = canonical(node);
      if (!root && schemas.has(text))
        repeats.push(`#/${at.join('/')} is components.schemas.${schemas.get(text)}`);
      if (at.at(-2) === 'parameters' && parameters.has(text)) {
        repeats.push(`#/${at.join('/')} is components.parameters.${parameters.get(text)}`);
      }
      if (at.at(-2) === 'responses' && answers.has(text)) {
        repeats.push(`#/${at.join('/')} is components.responses.${answers.get(text)}`);
      }
      if (at.at(-1) === 'requestBody' && bodies.has(text)) {
        repeats.push(`#/${at.join('/')} is components.requestBodies.${bodies.get(text)}`);
      }
      for (const [key, value] of Object.entries(node)) visit(value, [...at, key], false);
    };
    visit(committed.paths, ['paths'], true);
    for (const [name, schema] of Object.entries(committed.components.schemas as Json)) {
      visit(schema, ['components', 'schemas', name], true);
    }
    expect(repeats).toEqual([]);
  });

  it('has /v2 write out nothing its /v1 twin says: the same references, but for a page by cursor', () => {
    const operations = operationsOf(committed);
    const v2 = operations.filter(({ path: pathName }) => pathName.startsWith('/v2/'));
    expect(v2.length).toBeGreaterThan(40);
    const cursor = '#/components/parameters/cursor';
    let cursorLists = 0;
    for (const { method, path: pathName, operation } of v2) {
      const where = `${method.toUpperCase()} ${pathName}`;
      const twin = operations.find(
        (candidate) => candidate.method === method && candidate.path === pathName.replace(/^\/v2\//, '/v1/'),
      );
      expect(twin, `${where} has a /v1 twin`).toBeDefined();
      // A /v2 list pages by cursor where /v1 pages by number (src/platform/http/list-versions.ts): its
      // page answer and its page parameter are its own; everything else is the twin's.
      const pagesByCursor = (operation.parameters ?? []).some((parameter) => parameter.$ref === cursor);
      if (pagesByCursor) cursorLists += 1;
      const shared = ({ operationId: _id, ...rest }: Operation) => ({
        ...rest,
        parameters: rest.parameters?.filter((parameter) => !/\/(page|cursor)$/.test(String(parameter.$ref))),
        responses: Object.fromEntries(
          Object.entries(rest.responses).filter(([status]) => !(pagesByCursor && status === '200')),
        ),
      });
      expect(shared(operation), where).toEqual(shared(twin!.operation));
      // What they share, they share by reference: nothing of it is written out twice.
      const { parameters, requestBody, responses } = shared(operation);
      for (const part of [...(parameters ?? []), ...Object.values(responses), requestBody ?? { $ref: '' }]) {
        expect(Object.keys(part as Json), where).toEqual(['$ref']);
      }
    }
    expect(cursorLists).toBeGreaterThan(10);
  });

  it('serves every path, operation, parameter, body and status it served before it was organised so', async () => {
    await expect(outline(committed)).toMatchFileSnapshot('__snapshots__/openapi-outline.txt');
  });
});
