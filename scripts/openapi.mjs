/**
 * Generates the OpenAPI document from the compiled route schemas (dist/, so run `npm run build` first)
 * by building the app without listening, over a throwaway SQLite store.
 *
 *   node scripts/openapi.mjs --write   writes openapi/v1.json
 *   node scripts/openapi.mjs --check   fails when openapi/v1.json differs from the code, when the document
 *                                      has lint errors (@redocly/openapi-core, recommended rules), or when
 *                                      Spectral's spectral:oas ruleset (.spectral.yaml) reports anything
 *                                      at warning level or above
 *
 * The serialisation is deterministic (key order as generated, 2-space indent, trailing newline), so the
 * committed file changes exactly when the API does. An object or array that fits on one line of
 * LINE_WIDTH columns is written on one: a `$ref`, a header, an enum each take a line, not five.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConfig, formatProblems, getTotals, lintFromString } from '@redocly/openapi-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const committedFile = path.join(root, 'openapi', 'v1.json');
const relativeFile = path.relative(root, committedFile);

async function importDist(module) {
  try {
    return await import(path.join(root, 'dist', module));
  } catch (error) {
    throw new Error(`cannot load dist/${module} (run npm run build first): ${error.message}`);
  }
}

/** Builds the app as main.ts does, minus listeners, TLS and running jobs, and returns its generated document. */
async function generateDocument() {
  const { openBackends } = await importDist('composition.js');
  const { loadConfig } = await importDist('platform/config.js');
  const { RequestMetrics } = await importDist('platform/http/request-metrics.js');
  const { createLogger } = await importDist('platform/logger.js');
  const { buildApp } = await importDist('platform/http/app.js');

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-openapi-'));
  let backends = null;
  let app = null;
  try {
    backends = await openBackends(loadConfig({ NIMBUS_DATA_DIR: dataDir }), { steppedJobs: true });
    const { services } = backends;
    app = await buildApp({
      modules: backends.modules,
      authenticator: services.apiKeys,
      rateLimits: services.rateLimits,
      idempotency: services.idempotency,
      cursors: services.cursors,
      stateTables: services.stateTables,
      logger: createLogger('silent'),
      metrics: new RequestMetrics(),
      checkReady: async () => {},
      trustProxy: false,
      v1EndOfLife: null,
    });
    await app.ready();
    return app.swagger();
  } finally {
    if (app) await app.close();
    if (backends) await backends.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const LINE_WIDTH = 110;

/** `value` on one line: `{ "a": 1, "b": [true] }`. */
function oneLine(value) {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(oneLine).join(', ')}]`;
  const members = Object.entries(value).map(([key, member]) => `${JSON.stringify(key)}: ${oneLine(member)}`);
  return members.length === 0 ? '{}' : `{ ${members.join(', ')} }`;
}

/** `value` written at `indent`, where `column` characters of its line are already taken. */
function formatted(value, indent, column) {
  const flat = oneLine(value);
  if (value === null || typeof value !== 'object' || column + flat.length <= LINE_WIDTH) return flat;
  const inner = `${indent}  `;
  if (Array.isArray(value) && value.every((member) => member === null || typeof member !== 'object')) {
    return `[\n${filled(
      value.map((member) => JSON.stringify(member)),
      inner,
    ).join(',\n')}\n${indent}]`;
  }
  const lines = Array.isArray(value)
    ? value.map((member) => `${inner}${formatted(member, inner, inner.length)}`)
    : Object.entries(value).map(([key, member]) => {
        const label = `${inner}${JSON.stringify(key)}: `;
        return `${label}${formatted(member, inner, label.length)}`;
      });
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  return `${open}\n${lines.join(',\n')}\n${indent}${close}`;
}

/** Words (an enum's values, a `required` list) several to a line, as text is filled. */
function filled(words, indent) {
  const lines = [];
  let line = '';
  for (const word of words) {
    if (line !== '' && indent.length + line.length + 2 + word.length + 1 > LINE_WIDTH) {
      lines.push(`${indent}${line}`);
      line = word;
    } else line = line === '' ? word : `${line}, ${word}`;
  }
  lines.push(`${indent}${line}`);
  return lines;
}

function serialise(document) {
  // Through JSON first, so the file holds what the server serves (no undefined members, toJSON applied).
  return `${formatted(JSON.parse(JSON.stringify(document)), '', 0)}\n`;
}

/** Lints with Redocly's recommended ruleset; prints every problem and returns the totals. */
async function lint(source) {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lintFromString({ source, absoluteRef: committedFile, config });
  const totals = getTotals(problems);
  if (problems.length > 0) formatProblems(problems, { totals, format: 'stylish', color: false, cwd: root });
  return totals;
}

/**
 * Spectral through its CLI, the interface it keeps stable, on a copy of `source`; prints its findings.
 * Returns true when it found nothing at warning level or above.
 */
function spectral(source) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-spectral-'));
  try {
    const file = path.join(dir, 'v1.json');
    writeFileSync(file, source);
    const result = spawnSync(
      path.join(root, 'node_modules', '.bin', 'spectral'),
      ['lint', '--ruleset', path.join(root, '.spectral.yaml'), '--fail-severity', 'warn', '--quiet', file],
      { encoding: 'utf8' },
    );
    if (result.error) throw result.error;
    const output = `${result.stdout}${result.stderr}`.replaceAll(file, relativeFile).trim();
    if (output.length > 0) console.error(output);
    console.log(`spectral (spectral:oas): ${result.status === 0 ? 'no findings' : 'findings above'}`);
    return result.status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(argv) {
  const mode = argv[0];
  if (argv.length !== 1 || (mode !== '--write' && mode !== '--check')) {
    console.error('usage: node scripts/openapi.mjs --write | --check');
    return 2;
  }
  const generated = serialise(await generateDocument());

  if (mode === '--write') {
    mkdirSync(path.dirname(committedFile), { recursive: true });
    writeFileSync(committedFile, generated);
    console.log(`wrote ${relativeFile}`);
    const totals = await lint(generated);
    console.log(`lint: ${totals.errors} error(s), ${totals.warnings} warning(s)`);
    const clean = spectral(generated);
    return totals.errors > 0 || !clean ? 1 : 0;
  }

  let status = 0;
  let committed = null;
  try {
    committed = readFileSync(committedFile, 'utf8');
  } catch {
    // reported below as out of date
  }
  if (committed !== generated) {
    console.error(`${relativeFile} is out of date: run npm run openapi:write`);
    status = 1;
  }
  const totals = await lint(generated);
  if (totals.errors > 0) {
    console.error(`${relativeFile}: ${totals.errors} lint error(s), ${totals.warnings} warning(s)`);
    status = 1;
  } else {
    console.log(`${relativeFile}: lint passed (${totals.warnings} warning(s))`);
  }
  if (!spectral(generated)) {
    console.error(`${relativeFile}: Spectral reports findings (see above)`);
    status = 1;
  }
  if (status === 0) console.log(`${relativeFile} matches the code`);
  return status;
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  },
);
