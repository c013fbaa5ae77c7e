/**
 * The error catalogue (src/platform/error-catalogue.ts) is the one list of error codes: the copies
 * that cannot import it are held to it here. docs/api.md's table of codes, the SDK's list (the SDK is
 * a package of its own and carries no server code) and the CLI's exit code per code must name the same
 * codes with the same statuses; a code added to the catalogue fails here until each of them has it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { API_ERROR_CODES, ERROR_CLASS_BY_STATUS } from '../sdk/src/errors.js';
import { EXIT_BY_API_CODE } from '../src/cli/client/exit-codes.js';
import {
  ERROR_CATALOGUE,
  ERROR_CODES,
  ERROR_STATUSES,
  type ErrorCode,
} from '../src/platform/error-catalogue.js';
import { DomainError } from '../src/platform/errors.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The catalogue as `code → status`. */
const catalogued = Object.fromEntries(ERROR_CODES.map((code) => [code, ERROR_CATALOGUE[code].status]));

/** How `listed` differs from the catalogue: codes it lacks, codes it has extra, statuses it gets wrong. */
function differences(listed: Record<string, number>): string[] {
  const problems: string[] = [];
  for (const [code, status] of Object.entries(catalogued)) {
    if (!(code in listed)) problems.push(`missing ${code} (${status})`);
    else if (listed[code] !== status)
      problems.push(`${code} is ${listed[code]}, the catalogue says ${status}`);
  }
  for (const code of Object.keys(listed)) {
    if (!(code in catalogued)) problems.push(`${code} is not in the catalogue`);
  }
  return problems;
}

/**
 * The rows of the `| code | status | when |` table under docs/api.md's "Envelope and errors", as
 * `code → status`; a code listed twice is reported rather than overwritten.
 */
function documentedCodes(markdown: string): { codes: Record<string, number>; duplicates: string[] } {
  const section = markdown.slice(markdown.indexOf('\n## Envelope and errors\n'));
  const lines = section.split('\n');
  const header = lines.findIndex((line) => /^\|\s*code\s*\|\s*status\s*\|/.test(line));
  if (header === -1)
    throw new Error('docs/api.md has no "| code | status |" table under Envelope and errors');
  const codes: Record<string, number> = {};
  const duplicates: string[] = [];
  // The header, its |---| rule, then rows until the first line that is not one.
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const [, codeCell, statusCell] = line.split('|').map((cell) => cell.trim());
    const code = /^`([a-z_]+)`$/.exec(codeCell ?? '')?.[1];
    if (code === undefined) throw new Error(`docs/api.md: cannot read the code of row ${line}`);
    if (code in codes) duplicates.push(code);
    codes[code] = Number(statusCell);
  }
  return { codes, duplicates };
}

describe('error catalogue', () => {
  it('gives each code an error status and a one-line meaning', () => {
    for (const code of ERROR_CODES) {
      const { status, meaning } = ERROR_CATALOGUE[code];
      expect(status >= 400 && status <= 599, code).toBe(true);
      expect(code, code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      // The document joins the meanings of one status with "; " (describeStatus).
      expect(meaning, code).not.toMatch(/[;\n]/);
      expect(meaning.length, code).toBeGreaterThan(0);
    }
  });

  it('is the table in docs/api.md: no code missing or extra, each with its status', () => {
    const { codes, duplicates } = documentedCodes(readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8'));
    expect(duplicates, 'codes listed twice in docs/api.md').toEqual([]);
    expect(differences(codes), 'docs/api.md against the catalogue').toEqual([]);
  });

  it("is the SDK's list of codes, and the SDK has an error class only for statuses the API answers", () => {
    expect(differences(API_ERROR_CODES), 'sdk/src/errors.ts against the catalogue').toEqual([]);
    const classStatuses = Object.keys(ERROR_CLASS_BY_STATUS).map(Number);
    expect(classStatuses.filter((status) => !(ERROR_STATUSES as readonly number[]).includes(status))).toEqual(
      [],
    );
  });

  it('decides a CLI exit code for every code and no other', () => {
    expect(Object.keys(EXIT_BY_API_CODE).sort()).toEqual([...ERROR_CODES].sort());
  });

  it('refuses a code it does not list, at compile time and at run time', () => {
    // A typo is a type error (the type-check of this file fails if it is not)...
    // @ts-expect-error: 'not_fuond' is not an ErrorCode
    const typo = () => new DomainError('not_fuond', 'Instance ins_1 not found');
    // ...and a cast that forces one through is an unexpected error (a logged 500), never a silent status.
    expect(typo).toThrow(TypeError);
    expect(() => new DomainError('not_fuond' as ErrorCode, 'x')).toThrow(/not in the error catalogue/);
  });
});
