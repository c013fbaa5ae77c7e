/** An instance (or any resource) status as a badge whose text is the API's own status word. */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status}</span>;
}
