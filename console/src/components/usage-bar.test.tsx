import { render, screen } from '@testing-library/preact';
import { describe, expect, it } from 'vitest';
import { UsageBar } from './usage-bar.tsx';

function bar(used: number, limit: number) {
  render(<UsageBar label="Instances" used={used} limit={limit} />);
  return screen.getByRole('progressbar', { name: `Instances: ${used} of ${limit} used` });
}

describe('UsageBar', () => {
  it('says how much is used, in text and to assistive technology', () => {
    const progress = bar(3, 10);
    expect(screen.getByText('3 of 10')).toBeTruthy();
    expect(progress.getAttribute('max')).toBe('10');
    expect(progress.getAttribute('value')).toBe('3');
  });

  it('turns mid at 70 % and high at 90 % of the limit', () => {
    const levels = [
      [6, 10, 'usage-low'],
      [7, 10, 'usage-mid'],
      [8, 10, 'usage-mid'],
      [9, 10, 'usage-high'],
      [12, 10, 'usage-high'],
    ] as const;
    for (const [used, limit, level] of levels) {
      expect(bar(used, limit).className, `${used} of ${limit}`).toBe(level);
      document.body.innerHTML = '';
    }
  });

  it('a limit of zero reads as full', () => {
    expect(bar(0, 0).className).toBe('usage-high');
  });
});
