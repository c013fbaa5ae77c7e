/**
 * Invoice PDFs as a user gets them: the download's bytes over the server's TLS, and their text as
 * poppler's `pdftotext` reads it (npm test's set-up installs poppler-utils).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { TestServer } from './server.js';

/** GET a binary body (a PDF) with the key, as bytes; anything but a 200 rejects. */
export function pdfBytes(server: TestServer, url: string, key: string): Promise<Buffer> {
  const ca = readFileSync(server.running.certFile);
  return new Promise((resolve, reject) => {
    https
      .get(
        new URL(url, server.url),
        { ca, servername: 'localhost', headers: { authorization: `Bearer ${key}` } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            res.statusCode === 200
              ? resolve(Buffer.concat(chunks))
              : reject(new Error(`${url}: HTTP ${res.statusCode}`)),
          );
        },
      )
      .on('error', reject);
  });
}

/** The text of a PDF as pdftotext reads it (layout kept, so a row stays on its line). */
export function pdfText(pdf: Buffer): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-pdf-'));
  try {
    const file = path.join(dir, 'invoice.pdf');
    writeFileSync(file, pdf);
    return execFileSync('pdftotext', ['-layout', '-enc', 'UTF-8', file, '-'], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
