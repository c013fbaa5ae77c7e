/**
 * The two HTTP series of the metrics endpoint: requests answered, and the time taken to answer them, by
 * route template, method and status.
 *
 * They are recorded on every request, so recording is a few additions on plain numbers. prom-client,
 * which exports the process metrics, validates and hashes the label set on every inc() and observe():
 * about 1.5 µs a request for these two series, a cost that belongs at scrape time rather than on the
 * request path (docs/benchmarks.md). The text below follows the Prometheus exposition format 0.0.4 and
 * is appended to prom-client's at each scrape.
 */

const REQUESTS = {
  name: 'nimbus_http_requests_total',
  help: 'HTTP requests answered, by route, method and status',
};
const DURATION = {
  name: 'nimbus_http_request_duration_seconds',
  help: 'Time to answer HTTP requests, by route, method and status',
};

/** Upper bounds of the latency histogram, in seconds. */
export const DURATION_BUCKETS_SECONDS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
] as const;

interface Series {
  /** `route="…",method="…",status="…"`, escaped once when the series first appears. */
  labels: string;
  count: number;
  sumSeconds: number;
  /** Observations per bucket, not cumulative; the last slot holds those above every bound (+Inf). */
  perBucket: number[];
}

function labelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export class RequestMetrics {
  /** In order of first appearance, for the exposition. */
  private readonly series: Series[] = [];
  /**
   * Route → method → status → series. Route templates and method names are the same string objects on
   * every request, so these lookups hash nothing; a combined key would be built and hashed each time.
   */
  private readonly byRoute = new Map<string, Map<string, Map<number, Series>>>();

  private seriesFor(route: string, method: string, status: number): Series {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.byRoute.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let found = byStatus.get(status);
    if (found === undefined) {
      found = {
        labels: `route="${labelValue(route)}",method="${labelValue(method)}",status="${status}"`,
        count: 0,
        sumSeconds: 0,
        perBucket: new Array<number>(DURATION_BUCKETS_SECONDS.length + 1).fill(0),
      };
      byStatus.set(status, found);
      this.series.push(found);
    }
    return found;
  }

  record(route: string, method: string, status: number, seconds: number): void {
    const found = this.seriesFor(route, method, status);
    found.count += 1;
    found.sumSeconds += seconds;
    let bucket = 0;
    while (
      bucket < DURATION_BUCKETS_SECONDS.length &&
      seconds > (DURATION_BUCKETS_SECONDS[bucket] as number)
    ) {
      bucket += 1;
    }
    found.perBucket[bucket] = (found.perBucket[bucket] as number) + 1;
  }

  /** Both series in the Prometheus text format, ending with a newline. */
  exposition(): string {
    const lines = [`# HELP ${REQUESTS.name} ${REQUESTS.help}`, `# TYPE ${REQUESTS.name} counter`];
    for (const { labels, count } of this.series) lines.push(`${REQUESTS.name}{${labels}} ${count}`);
    lines.push(`# HELP ${DURATION.name} ${DURATION.help}`, `# TYPE ${DURATION.name} histogram`);
    for (const { labels, count, sumSeconds, perBucket } of this.series) {
      let cumulative = 0;
      DURATION_BUCKETS_SECONDS.forEach((bound, index) => {
        cumulative += perBucket[index] as number;
        lines.push(`${DURATION.name}_bucket{le="${bound}",${labels}} ${cumulative}`);
      });
      lines.push(`${DURATION.name}_bucket{le="+Inf",${labels}} ${count}`);
      lines.push(`${DURATION.name}_sum{${labels}} ${sumSeconds}`);
      lines.push(`${DURATION.name}_count{${labels}} ${count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}
