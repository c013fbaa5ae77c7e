/**
 * Set-up of the console's component tests (vitest.config.ts, project `console`, in happy-dom): each test
 * starts from an empty document, and from no signed-in key.
 */
import { cleanup } from '@testing-library/preact';
import { afterEach } from 'vitest';

afterEach(() => {
  cleanup();
  sessionStorage.clear();
});
