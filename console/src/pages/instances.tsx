/**
 * Instances: the list (filters, sort, pages), with statuses kept live by the account-wide stream, and
 * the row actions. Data: GET /v1/instances. Actions: instance-actions.tsx.
 */
import { useLayoutEffect, useState } from 'preact/hooks';
import { type Instance, type InstanceStatus, STATE_TABLES, unwrap } from '../api.ts';
import { EmptyState } from '../components/empty-state.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { SelectField } from '../components/field.tsx';
import { StatusBadge } from '../components/status-badge.tsx';
import { StreamBanner } from '../components/stream-banner.tsx';
import { type Column, Pager, type Sort, Table } from '../components/table.tsx';
import { formatDate } from '../format.ts';
import { useLive } from '../live.ts';
import { useLoad } from '../load.ts';
import { currentSession } from '../session.ts';
import { InstanceActions } from './instance-actions.tsx';

export const STATUSES: readonly InstanceStatus[] = STATE_TABLES.instance.statuses;
export const REGIONS = ['us-east-1', 'us-west-2', 'eu-central-1', 'ap-northeast-1'] as const;
type Region = (typeof REGIONS)[number];
const PAGE_SIZES = [20, 50, 100] as const;
type PageSize = (typeof PAGE_SIZES)[number];
/** The chosen page size outlives the page (for the tab's life), so coming back keeps it. */
let chosenPageSize: PageSize = 20;
/**
 * Marked (performance.mark) each time the table's rows are in the DOM, with the row count as detail:
 * bench/console-render.mjs times the list from it.
 */
export const ROWS_COMMITTED_MARK = 'instances:rows-committed';

interface Filters {
  status: InstanceStatus | '';
  region: Region | '';
  /** `key=value` or `key`, as the API's tag filter takes it. */
  tag: string;
}

export function InstancesPage() {
  const [filters, setFilters] = useState<Filters>({ status: '', region: '', tag: '' });
  const [sort, setSort] = useState<Sort>({ key: 'created_at', order: 'desc' });
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState<PageSize>(chosenPageSize);
  const list = useLoad(
    () =>
      unwrap(
        currentSession().api.GET('/v1/instances', {
          params: {
            query: {
              page,
              limit: pageSize,
              sort: sort.key as 'created_at',
              order: sort.order,
              ...(filters.status ? { status: filters.status } : {}),
              ...(filters.region ? { region: filters.region } : {}),
              ...(filters.tag.trim() ? { tag: [filters.tag.trim()] } : {}),
            },
          },
        }),
      ),
    [page, pageSize, sort.key, sort.order, filters.status, filters.region, filters.tag],
  );
  const instances = list.data?.data ?? [];
  // A layout effect runs right after the DOM is committed, before paint: the rows exist now.
  useLayoutEffect(() => {
    if (list.data) performance.mark(ROWS_COMMITTED_MARK, { detail: { rows: list.data.data.length } });
  }, [list.data]);
  const live = useLive({ instances: instances.map((instance) => instance.id) });
  const statusOf = (instance: Instance) => live.statuses[instance.id] ?? instance.status;
  const changePageSize = (size: PageSize) => {
    chosenPageSize = size;
    setPageSize(size);
    setPage(1);
  };
  const changeFilter = (change: Partial<Filters>) => {
    setFilters({ ...filters, ...change });
    setPage(1);
  };

  const columns: Column<Instance>[] = [
    { label: 'Name', sortKey: 'name', render: (i) => <a href={`/console/instances/${i.id}`}>{i.name}</a> },
    { label: 'Status', sortKey: 'status', render: (i) => <StatusBadge status={statusOf(i)} /> },
    { label: 'Type', sortKey: 'instance_type', render: (i) => i.instance_type },
    { label: 'Region', render: (i) => i.region },
    { label: 'Public IP', render: (i) => <code>{i.public_ip}</code> },
    { label: 'Created', sortKey: 'created_at', render: (i) => formatDate(i.created_at) },
    {
      label: 'Actions',
      render: (i) => (
        <InstanceActions
          instance={i}
          status={statusOf(i)}
          onStatus={(status) => live.setStatus(i.id, status)}
          onChanged={list.reload}
        />
      ),
    },
  ];

  return (
    <section>
      <div class="page-head">
        <h1>Instances</h1>
        <a class="button primary" href="/console/instances/new">
          Create instance
        </a>
      </div>
      <form class="filters" aria-label="Filter instances" onSubmit={(event) => event.preventDefault()}>
        <SelectField
          label="Status"
          value={filters.status}
          options={[{ value: '', label: 'Any status' }, ...STATUSES]}
          onValue={(status) => changeFilter({ status })}
        />
        <SelectField
          label="Region"
          value={filters.region}
          options={[{ value: '', label: 'Any region' }, ...REGIONS]}
          onValue={(region) => changeFilter({ region })}
        />
        {/* Hand-written rather than a TextField: the tag filter applies on change (Enter or leaving the field),
            not on every keystroke, so typing a tag does not reload the list per letter. */}
        <div class="field">
          <label for="filter-tag">Tag</label>
          <input
            id="filter-tag"
            placeholder="env=prod"
            value={filters.tag}
            onChange={(event) => changeFilter({ tag: event.currentTarget.value })}
          />
        </div>
        <SelectField
          label="Per page"
          value={String(pageSize)}
          options={PAGE_SIZES.map(String)}
          onValue={(size) => changePageSize(Number(size) as PageSize)}
        />
      </form>
      <StreamBanner state={live.state} />
      <ErrorNotice error={list.error} />
      {list.data && instances.length === 0 ? (
        <EmptyState title="No instances here yet">
          <p>
            {filters.status || filters.region || filters.tag
              ? 'No instance matches these filters: clear them to see every instance.'
              : 'Create your first instance: pick a type, a region and an image.'}
          </p>
          <a class="button primary" href="/console/instances/new">
            Create instance
          </a>
        </EmptyState>
      ) : (
        <Table
          caption="Instances"
          columns={columns}
          rows={instances}
          rowKey={(i) => i.id}
          sort={sort}
          onSort={setSort}
        />
      )}
      {list.data && <Pager page={page} totalPages={list.data.pagination.total_pages} onPage={setPage} />}
    </section>
  );
}
