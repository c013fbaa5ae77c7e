/**
 * Reading the OpenAPI document through its `$ref`s: the document lists each shared part once under
 * `components` (src/platform/http/openapi-components.ts) and points at it everywhere else, so a reader that wants
 * an operation's response, header or parameter follows the reference first.
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** JSON Pointer (RFC 6901) of path segments, `#`-prefixed as a `$ref` writes it. */
export function pointerOf(...segments: string[]): string {
  return `#/${segments.map((segment) => segment.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

/** The value a local `$ref` (`#/components/…`) names; throws when it names nothing. */
export function lookUp(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`${ref} is not a reference inside the document`);
  let node = document;
  for (const segment of ref.slice(2).split('/')) {
    const key = segment.replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isObject(node) && !Array.isArray(node)) throw new Error(`${ref} names nothing`);
    node = (node as Json)[key];
    if (node === undefined) throw new Error(`${ref} names nothing`);
  }
  return node;
}

/**
 * `node` itself, or what its `$ref` names (following references to references), with the pointer of
 * where the value found lives: `#/paths/…` for an inline part, `#/components/…` for a shared one.
 */
export function resolved<T = Json>(
  document: unknown,
  node: unknown,
  pointer: string,
): { value: T; pointer: string } {
  let value = node;
  let at = pointer;
  const seen = new Set<string>();
  while (isObject(value) && typeof value.$ref === 'string') {
    if (seen.has(value.$ref)) throw new Error(`${value.$ref} refers to itself`);
    seen.add(value.$ref);
    at = value.$ref;
    value = lookUp(document, value.$ref);
  }
  return { value: value as T, pointer: at };
}

/** A copy of the document with every `$ref` replaced by what it names: the document as if written inline. */
export function dereferenced<T>(document: T): T {
  return inlined(document, document, []) as T;
}

function inlined(document: unknown, node: unknown, within: string[]): unknown {
  if (Array.isArray(node)) return node.map((item) => inlined(document, item, within));
  if (!isObject(node)) return node;
  if (typeof node.$ref === 'string') {
    if (within.includes(node.$ref)) throw new Error(`${node.$ref} contains itself`);
    const { $ref, ...besides } = node;
    if (Object.keys(besides).length > 0) throw new Error(`${$ref} has siblings, which this reader ignores`);
    return inlined(document, lookUp(document, $ref), [...within, $ref]);
  }
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => [key, inlined(document, value, within)]),
  );
}
