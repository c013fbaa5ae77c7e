/**
 * The SDK's types at work, as a user's program meets them: small programs importing `@nimbus/sdk` (the
 * built package, as npm installs it) are compiled by the TypeScript compiler with the repository's
 * settings. The correct one compiles; each mistake (a misspelt field of a request body, of an answer, a
 * path that does not exist, a value outside an enumeration, a wrong parameter type) fails with the error
 * that names it. test/sdk.test.ts holds the same misuses as @ts-expect-error lines, which `npm run
 * typecheck` checks on every run; here the failures themselves are seen.
 */
import path from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from './helpers/cli.js';

const PROGRAMS: Record<string, string> = {
  correct: `
    const { data: created } = await nimbus.post('/v1/instances', {
      body: { name: 'web-1', instance_type: 'compute-2x', region: 'us-east-1', image: 'ubuntu-24.04' },
    });
    const running = await nimbus.waitFor(created, 'running');
    const status: string = running.status;
    for await (const key of nimbus.paginate('/v1/ssh-keys', { params: { query: { limit: 50 } } })) console.log(key.name);
    console.log(status);`,
  bodyField: `
    await nimbus.post('/v1/instances', {
      body: { name: 'web-1', instance_typ: 'compute-2x', region: 'us-east-1', image: 'ubuntu-24.04' },
    });`,
  answerField: `
    const { data } = await nimbus.get('/v1/instances/{id}', { params: { path: { id: 'ins_1' } } });
    console.log(data.stauts);`,
  path: `
    await nimbus.get('/v1/instancez', {});`,
  pathAlone: `
    await nimbus.get('/v1/instancez');`,
  enumValue: `
    await nimbus.post('/v1/instances', {
      body: { name: 'web-1', instance_type: 'compute-2x', region: 'mars-1', image: 'ubuntu-24.04' },
    });`,
  queryType: `
    await nimbus.get('/v1/instances', { params: { query: { limit: 'ten' } } });`,
  waitStatus: `
    const { data: created } = await nimbus.post('/v1/volumes', { body: { name: 'd', size_gb: 10, region: 'us-east-1' } });
    await nimbus.waitFor(created, 'runing');`,
};

function source(body: string): string {
  return `import { Nimbus } from '@nimbus/sdk';\nconst nimbus = new Nimbus();\n${body}\nexport {};\n`;
}

describe('SDK types in a program that uses them', () => {
  /** Each program's errors, as `tsc` prints them: "TS<code>: <message>". */
  const errors: Record<string, string[]> = {};

  beforeAll(() => {
    ensureBuilt(); // the package's dist/ (its .d.ts) is what a user compiles against
    const config = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
    const files = new Map(
      Object.entries(PROGRAMS).map(([name, body]) => [
        path.join(ROOT, 'test', `sdk-usage-${name}.ts`),
        source(body),
      ]),
    );
    const host = ts.createCompilerHost({ ...options, noEmit: true });
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (fileName, languageVersion, ...rest) => {
      const text = files.get(fileName);
      return text === undefined
        ? getSourceFile(fileName, languageVersion, ...rest)
        : ts.createSourceFile(fileName, text, languageVersion, true);
    };
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (fileName) => files.has(fileName) || fileExists(fileName);
    const readFile = host.readFile.bind(host);
    host.readFile = (fileName) => files.get(fileName) ?? readFile(fileName);
    // Nothing is written: the programs exist only in memory.
    const program = ts.createProgram([...files.keys()], { ...options, noEmit: true }, host);
    for (const [fileName] of files) {
      const name = path.basename(fileName, '.ts').replace('sdk-usage-', '');
      errors[name] = ts
        .getPreEmitDiagnostics(program, program.getSourceFile(fileName))
        .map((d) => `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    }
  }, 300_000);

  it('a correct program compiles: create, waitFor, paginate, typed answers', () => {
    expect(errors.correct).toEqual([]);
  });

  it('a misspelt field of a request body does not compile', () => {
    expect(errors.bodyField).toEqual([
      expect.stringMatching(
        /^TS2561: Object literal may only specify known properties, but 'instance_typ' does not exist .* Did you mean to write 'instance_type'\?$/s,
      ),
    ]);
  });

  it('a misspelt field of an answer does not compile, and the compiler names the right one', () => {
    expect(errors.answerField).toEqual([
      expect.stringMatching(/^TS2551: Property 'stauts' does not exist on type .* Did you mean 'status'\?$/s),
    ]);
  });

  it('a path the API does not have, a region it does not know, a string for a number: none compiles', () => {
    expect(errors.path!.join('\n')).toMatch(/TS2345: Argument of type '"\/v1\/instancez"' is not assignable/);
    // Alone, no path matches to say which arguments it takes: the compiler stops at their number.
    expect(errors.pathAlone).toEqual(['TS2554: Expected 2 arguments, but got 1.']);
    expect(errors.enumValue!.join('\n')).toMatch(/'"mars-1"' is not assignable to type '"us-east-1" \| /);
    expect(errors.queryType!.join('\n')).toMatch(/Type 'string' is not assignable to type 'number'/);
  });

  it('waitFor takes only a status the resource can have', () => {
    expect(errors.waitStatus!.join('\n')).toMatch(/'"runing"' is not assignable to parameter of type/);
  });
});
