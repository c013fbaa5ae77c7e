/**
 * Request validators. Query strings, path parameters and headers arrive as text, so their validator
 * converts "20" to 20; JSON bodies already carry types, so theirs converts nothing: `{"name": 42}` is
 * an error, not the name "42". Neither removes unknown fields: schemas reject them instead.
 */
import { Ajv, type Options } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
    ...options,
  });
  // ajv-formats is CommonJS: under NodeNext its default export arrives as the module object.
  (formatsPlugin as unknown as { default: (ajv: Ajv) => void }).default(ajv);
  return ajv;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const forText = createAjv({ coerceTypes: 'array' });
  const forJson = createAjv({ coerceTypes: false });
  return ({ schema, httpPart }) => (httpPart === 'body' ? forJson : forText).compile(schema as object);
}
