import { fireEvent, render, screen } from '@testing-library/preact';
import { describe, expect, it, vi } from 'vitest';
import { SelectField, TextAreaField, TextField } from './field.tsx';

describe('TextField', () => {
  it('is named by its label, described by its hint, and reports what is typed', () => {
    const onValue = vi.fn();
    render(
      <TextField
        label="Size (GB)"
        hint="Volumes only grow."
        type="number"
        min={1}
        value="10"
        onValue={onValue}
      />,
    );
    const input = screen.getByRole('spinbutton', { name: 'Size (GB)' }) as HTMLInputElement;
    expect(input.getAttribute('min')).toBe('1');
    const hint = document.getElementById(input.getAttribute('aria-describedby') ?? '');
    expect(hint?.textContent).toBe('Volumes only grow.');
    fireEvent.input(input, { target: { value: '12' } });
    expect(onValue).toHaveBeenCalledWith('12');
  });

  it('has no aria-describedby without a hint, and the wide layout class only when asked', () => {
    render(<TextField label="Name" value="" onValue={() => {}} />);
    const input = screen.getByRole('textbox', { name: 'Name' });
    expect(input.hasAttribute('aria-describedby')).toBe(false);
    expect(input.parentElement?.className).toBe('field');
    document.body.innerHTML = '';
    render(<TextField label="Name" wide value="" onValue={() => {}} />);
    expect(screen.getByRole('textbox', { name: 'Name' }).parentElement?.className).toBe('field wide');
  });
});

describe('SelectField', () => {
  it('lists string and labelled options before the page-written ones, and hands back the chosen value', () => {
    const onValue = vi.fn();
    render(
      <SelectField
        label="Filesystem"
        value="ext4"
        options={['ext4', { value: 'xfs', label: 'XFS' }]}
        onValue={onValue}
      >
        <option value="">None (raw disk)</option>
      </SelectField>,
    );
    const select = screen.getByRole('combobox', { name: 'Filesystem' }) as HTMLSelectElement;
    expect([...select.options].map((o) => [o.value, o.text])).toEqual([
      ['ext4', 'ext4'],
      ['xfs', 'XFS'],
      ['', 'None (raw disk)'],
    ]);
    fireEvent.change(select, { target: { value: 'xfs' } });
    expect(onValue).toHaveBeenCalledWith('xfs');
  });
});

describe('TextAreaField', () => {
  it('is named by its label, keeps its class and hint, and reports what is typed', () => {
    const onValue = vi.fn();
    render(<TextAreaField label="Public key" class="key-text" hint="One line." value="" onValue={onValue} />);
    const area = screen.getByRole('textbox', { name: 'Public key' });
    expect(area.className).toBe('key-text');
    expect(document.getElementById(area.getAttribute('aria-describedby') ?? '')?.textContent).toBe(
      'One line.',
    );
    fireEvent.input(area, { target: { value: 'ssh-ed25519 AAAA' } });
    expect(onValue).toHaveBeenCalledWith('ssh-ed25519 AAAA');
  });
});
