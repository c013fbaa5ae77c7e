/**
 * A data table: columns say how to render a row and, optionally, which API sort key they map to; a
 * sortable header is a button that toggles the order (aria-sort tells screen readers).
 */
import type { ComponentChildren } from 'preact';

export interface Column<Row> {
  label: string;
  render: (row: Row) => ComponentChildren;
  /** The list endpoint's `sort` value for this column, when it can sort by it. */
  sortKey?: string;
}

export interface Sort {
  key: string;
  order: 'asc' | 'desc';
}

interface TableProps<Row> {
  caption: string;
  columns: Column<Row>[];
  rows: Row[];
  rowKey: (row: Row) => string;
  sort?: Sort;
  onSort?: (sort: Sort) => void;
}

export function Table<Row>({ caption, columns, rows, rowKey, sort, onSort }: TableProps<Row>) {
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => {
              const active = sort && column.sortKey === sort.key;
              const ariaSort = active ? (sort.order === 'asc' ? 'ascending' : 'descending') : undefined;
              return (
                <th key={column.label} scope="col" aria-sort={ariaSort}>
                  {column.sortKey && onSort ? (
                    <button
                      type="button"
                      class="sort"
                      onClick={() =>
                        onSort({
                          key: column.sortKey as string,
                          order: active && sort.order === 'asc' ? 'desc' : 'asc',
                        })
                      }
                    >
                      {column.label}
                      <span aria-hidden="true">{active ? (sort.order === 'asc' ? ' ▲' : ' ▼') : ''}</span>
                    </button>
                  ) : (
                    column.label
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) => (
                <td key={column.label} data-label={column.label}>
                  {column.render(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Previous/next page buttons for page-numbered lists. */
export function Pager(props: { page: number; totalPages: number; onPage: (page: number) => void }) {
  if (props.totalPages <= 1) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={props.page <= 1} onClick={() => props.onPage(props.page - 1)}>
        Previous page
      </button>
      <span>
        Page {props.page} of {props.totalPages}
      </span>
      <button
        type="button"
        disabled={props.page >= props.totalPages}
        onClick={() => props.onPage(props.page + 1)}
      >
        Next page
      </button>
    </nav>
  );
}
