import { fireEvent, render, screen } from '@testing-library/preact';
import { useState } from 'preact/hooks';
import { describe, expect, it, vi } from 'vitest';
import { type Column, Pager, type Sort, Table } from './table.tsx';

interface Row {
  id: string;
  name: string;
  size: number;
}

const ROWS: Row[] = [
  { id: 'a', name: 'alpha', size: 3 },
  { id: 'b', name: 'bravo', size: 1 },
];
const COLUMNS: Column<Row>[] = [
  { label: 'Name', render: (row) => row.name, sortKey: 'name' },
  { label: 'Size', render: (row) => `${row.size} GB` },
];

/** A table whose sort the caller keeps, as the list pages do (they pass it on to the API). */
function Sorted(props: { initial?: Sort; onSort: (sort: Sort) => void }) {
  const [sort, setSort] = useState<Sort | undefined>(props.initial);
  return (
    <Table
      caption="Volumes"
      columns={COLUMNS}
      rows={ROWS}
      rowKey={(row) => row.id}
      sort={sort}
      onSort={(next) => {
        setSort(next);
        props.onSort(next);
      }}
    />
  );
}

describe('Table', () => {
  it('renders a row per item, cells labelled with their column for narrow screens', () => {
    render(<Table caption="Volumes" columns={COLUMNS} rows={ROWS} rowKey={(row) => row.id} />);
    const table = screen.getByRole('table', { name: 'Volumes' });
    const rows = table.querySelectorAll('tbody tr');
    expect([...rows].map((row) => row.textContent)).toEqual(['alpha3 GB', 'bravo1 GB']);
    expect([...rows[0]!.querySelectorAll('td')].map((cell) => cell.dataset.label)).toEqual(['Name', 'Size']);
    // Without onSort no header is a button.
    expect(screen.queryByRole('button')).toBeNull();
  });

  it('a sortable header toggles ascending and descending, and aria-sort follows', () => {
    const onSort = vi.fn();
    render(<Sorted onSort={onSort} />);
    const header = () => screen.getByRole('columnheader', { name: /Name/ });
    expect(header().getAttribute('aria-sort')).toBeNull();
    // Only the column with a sort key is a button.
    expect(screen.getAllByRole('button').map((button) => button.textContent)).toEqual(['Name']);

    fireEvent.click(screen.getByRole('button', { name: /Name/ }));
    expect(onSort).toHaveBeenLastCalledWith({ key: 'name', order: 'asc' });
    expect(header().getAttribute('aria-sort')).toBe('ascending');
    expect(header().textContent).toBe('Name ▲');

    fireEvent.click(screen.getByRole('button', { name: /Name/ }));
    expect(onSort).toHaveBeenLastCalledWith({ key: 'name', order: 'desc' });
    expect(header().getAttribute('aria-sort')).toBe('descending');
    expect(header().textContent).toBe('Name ▼');

    fireEvent.click(screen.getByRole('button', { name: /Name/ }));
    expect(onSort).toHaveBeenLastCalledWith({ key: 'name', order: 'asc' });
    expect(screen.getByRole('columnheader', { name: 'Size' }).getAttribute('aria-sort')).toBeNull();
  });

  it('a list sorted by another key starts this column ascending', () => {
    const onSort = vi.fn();
    render(<Sorted initial={{ key: 'created_at', order: 'asc' }} onSort={onSort} />);
    fireEvent.click(screen.getByRole('button', { name: /Name/ }));
    expect(onSort).toHaveBeenCalledWith({ key: 'name', order: 'asc' });
  });
});

describe('Pager', () => {
  it('shows nothing for a single page', () => {
    const { container } = render(<Pager page={1} totalPages={1} onPage={() => {}} />);
    expect(container.innerHTML).toBe('');
    render(<Pager page={1} totalPages={0} onPage={() => {}} />);
    expect(screen.queryByRole('navigation')).toBeNull();
  });

  it('moves a page at a time and cannot go past either end', () => {
    const onPage = vi.fn();
    const { rerender } = render(<Pager page={1} totalPages={3} onPage={onPage} />);
    const pages = screen.getByRole('navigation', { name: 'Pages' });
    expect(pages.textContent).toContain('Page 1 of 3');
    const previous = () => screen.getByRole('button', { name: 'Previous page' }) as HTMLButtonElement;
    const next = () => screen.getByRole('button', { name: 'Next page' }) as HTMLButtonElement;
    expect(previous().disabled).toBe(true);
    fireEvent.click(next());
    expect(onPage).toHaveBeenLastCalledWith(2);

    rerender(<Pager page={2} totalPages={3} onPage={onPage} />);
    expect(previous().disabled).toBe(false);
    fireEvent.click(previous());
    expect(onPage).toHaveBeenLastCalledWith(1);

    rerender(<Pager page={3} totalPages={3} onPage={onPage} />);
    expect(next().disabled).toBe(true);
    expect(screen.getByText('Page 3 of 3')).toBeTruthy();
  });
});
