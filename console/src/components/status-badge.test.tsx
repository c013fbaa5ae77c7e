import { render, screen } from '@testing-library/preact';
import { describe, expect, it } from 'vitest';
import { StatusBadge } from './status-badge.tsx';

describe('StatusBadge', () => {
  it("shows the API's status word itself, styled by it", () => {
    for (const status of ['starting', 'running', 'stopping', 'error', 'firing']) {
      const { unmount } = render(<StatusBadge status={status} />);
      const badge = screen.getByText(status, { exact: true });
      expect(badge.textContent).toBe(status);
      expect(badge.className).toBe(`badge badge-${status}`);
      unmount();
    }
  });
});
