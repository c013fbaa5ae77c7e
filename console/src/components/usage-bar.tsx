/** How much of a limit is used, as a labelled bar (a quota, a budget): "3 of 10". */
export function UsageBar({ label, used, limit }: { label: string; used: number; limit: number }) {
  const ratio = limit > 0 ? Math.min(1, used / limit) : 1;
  const level = ratio >= 0.9 ? 'high' : ratio >= 0.7 ? 'mid' : 'low';
  return (
    <div class="usage-bar">
      <div class="usage-bar-head">
        <span>{label}</span>
        <span class="muted">
          {used} of {limit}
        </span>
      </div>
      <progress
        class={`usage-${level}`}
        aria-label={`${label}: ${used} of ${limit} used`}
        max={limit}
        value={used}
      />
    </div>
  );
}
