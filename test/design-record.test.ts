/**
 * The project carries its own design record (issue 30 item 7): no source or documentation file cites the
 * specification or design notes kept outside the repository, and every citation of a section of a page in
 * docs/ — `(docs/design.md, "Quotas and plans")` in code, `[api.md](api.md) ("Volumes")` or
 * `[design.md](design.md#rate-limits)` in the docs — names a section that exists, so a renamed heading
 * fails here instead of leaving a pointer to nothing.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Where the project's own text lives: sources, tests, scripts, benchmarks, CI and docs. */
const SCANNED = [
  '.ci',
  'README.md',
  'bin',
  'bench',
  'console',
  'docs',
  'package.json',
  'scripts',
  'sdk',
  'src',
  'test',
];
/** Built, installed or generated from what is scanned. */
const SKIPPED_DIRECTORIES = new Set(['node_modules', 'dist', 'generated', 'coverage']);
const TEXT_FILE = /(^[^.]+|\.(ts|tsx|js|mjs|cjs|json|md|sh|css|html|yml|yaml))$/;

/** The outside documents, by the file names they had there. */
const OUTSIDE_DOCUMENT = /\b(?:DESIGN|SPEC)\.md\b/;

function scannedFiles(): string[] {
  const files: string[] = [];
  const walk = (relative: string): void => {
    const entries = readdirSync(path.join(ROOT, relative), { withFileTypes: true });
    for (const entry of entries) {
      const child = path.posix.join(relative, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRECTORIES.has(entry.name)) walk(child);
      } else if (entry.isFile() && TEXT_FILE.test(entry.name)) {
        files.push(child);
      }
    }
  };
  for (const top of SCANNED) {
    if (statSync(path.join(ROOT, top)).isDirectory()) walk(top);
    else files.push(top);
  }
  return files;
}

const FILES = scannedFiles().map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));

/** The headings of a Markdown page (none when there is no such page), leaving out `#` lines inside fenced code. */
function headingsOf(page: string): string[] {
  const headings: string[] = [];
  if (!existsSync(path.join(ROOT, page))) return headings;
  let fenced = false;
  for (const line of readFileSync(path.join(ROOT, page), 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.+?)\s*$/.exec(line);
    if (heading?.[1]) headings.push(heading[1]);
  }
  return headings;
}

/** A section may be cited by its whole heading or by the part before a colon or a parenthesis. */
function namesOf(heading: string): string[] {
  return [heading, heading.split(':')[0] ?? heading, heading.split(' (')[0] ?? heading];
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Every cited section, as where it is cited, the page (relative to the root) and the name. */
function citations(): { at: string; page: string; name: string }[] {
  const found: { at: string; page: string; name: string }[] = [];
  for (const { file, text } of FILES) {
    // In code and docs alike: docs/<page>.md, "Section" (a comment's line break may follow the comma).
    for (const match of text.matchAll(/\bdocs\/([\w-]+\.md),?\s*(?:(?:\*|\/\/)\s*)?"([^"\n]+)"/g)) {
      found.push({
        at: `${file}:${lineOf(text, match.index)}`,
        page: `docs/${match[1]}`,
        name: match[2] ?? '',
      });
    }
    if (!file.endsWith('.md')) continue;
    // In the docs: a link to a page followed by the sections meant, [api.md](api.md) ("Volumes", "VPNs").
    for (const match of text.matchAll(/\]\(([\w./-]+\.md)\),?\s+\(?((?:"[^"\n]+"(?:,\s+)?)+)/g)) {
      const page = path.posix.normalize(path.posix.join(path.posix.dirname(file), match[1] ?? ''));
      for (const name of (match[2] ?? '').matchAll(/"([^"]+)"/g)) {
        found.push({ at: `${file}:${lineOf(text, match.index)}`, page, name: name[1] ?? '' });
      }
    }
  }
  return found;
}

/** Every link to an anchor of another Markdown page, as where it is, the page and the anchor. */
function anchorLinks(): { at: string; page: string; anchor: string }[] {
  const found: { at: string; page: string; anchor: string }[] = [];
  for (const { file, text } of FILES) {
    if (!file.endsWith('.md')) continue;
    for (const match of text.matchAll(/\]\(([\w./-]+\.md)#([^)\s]+)\)/g)) {
      const page = path.posix.normalize(path.posix.join(path.posix.dirname(file), match[1] ?? ''));
      found.push({ at: `${file}:${lineOf(text, match.index)}`, page, anchor: match[2] ?? '' });
    }
  }
  return found;
}

describe('the design record', () => {
  it('is cited instead of documents outside the repository: no file names them', () => {
    const citing = FILES.flatMap(({ file, text }) =>
      text
        .split('\n')
        .flatMap((line, index) =>
          OUTSIDE_DOCUMENT.test(line) ? [`${file}:${index + 1}: ${line.trim()}`] : [],
        ),
    );
    expect(citing).toEqual([]);
  });

  it('has each section once, so a citation names one place', () => {
    const headings = headingsOf('docs/design.md');
    expect(headings.length).toBeGreaterThan(20);
    expect(headings.filter((heading, index) => headings.indexOf(heading) !== index)).toEqual([]);
  });

  it('and the other docs pages have every section that code and docs cite by name', () => {
    const found = citations();
    expect(found.filter(({ page }) => page === 'docs/design.md').length).toBeGreaterThan(40);
    const names = new Map<string, Set<string>>();
    const missing = found.filter(({ page, name }) => {
      let pageNames = names.get(page);
      if (!pageNames) {
        pageNames = new Set(headingsOf(page).flatMap(namesOf));
        names.set(page, pageNames);
      }
      return !pageNames.has(name);
    });
    expect(missing.map(({ at, page, name }) => `${at}: ${page}, "${name}"`)).toEqual([]);
  });

  it('and every link to a section of a page leads to one of its headings', () => {
    const found = anchorLinks();
    expect(found.some(({ page }) => page === 'docs/design.md')).toBe(true);
    const missing = found.filter(({ page, anchor }) => !headingsOf(page).map(anchorOf).includes(anchor));
    expect(missing.map(({ at, page, anchor }) => `${at}: ${page}#${anchor}`)).toEqual([]);
  });

  it('is linked from the README and from docs/architecture.md', () => {
    const text = (file: string) => FILES.find((entry) => entry.file === file)?.text ?? '';
    expect(text('README.md')).toContain('](docs/design.md)');
    expect(text('docs/architecture.md')).toContain('](design.md)');
  });
});
