/**
 * Builds the web console into dist/console, served by the API server under /console/ (src/platform/http/console-routes.ts).
 * Asset names carry a content hash, so the server can cache them for a year; index.html is never cached.
 */
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

export default defineConfig({
  root: decodeURIComponent(new URL('.', import.meta.url).pathname),
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: decodeURIComponent(new URL('../dist/console', import.meta.url).pathname),
    emptyOutDir: true,
    // The strict CSP forbids inline script and style: never inline assets into index.html.
    assetsInlineLimit: 0,
    target: 'es2022',
    sourcemap: false,
  },
});
