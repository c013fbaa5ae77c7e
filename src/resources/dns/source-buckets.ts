/**
 * Queries per source, as token buckets: each source may ask `perSecond` questions a second, in bursts of
 * up to `burst`. A source is an IPv4 address, or an IPv6 /64 (one host usually holds a whole /64, so
 * counting its single addresses would count nothing). The buckets of at most `maxSources` sources are
 * kept, the one heard from longest ago making room for a new one, so a flood of spoofed sources costs a
 * bounded map and the worst it does is refill a bucket early.
 */
import { isIPv4 } from 'node:net';

export interface BucketSettings {
  perSecond: number;
  burst: number;
  maxSources: number;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date, in ms. */
  at: number;
}

export class SourceBuckets {
  /** In the order the sources were last heard from: the first is the one to forget. */
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly settings: BucketSettings,
    /** Milliseconds from any fixed origin. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether a query from `address` may be answered now; takes its token when it may. */
  take(address: string): boolean {
    const source = sourceOf(address);
    const now = this.now();
    const { perSecond, burst } = this.settings;
    const bucket = this.buckets.get(source);
    let tokens = burst;
    if (bucket) {
      tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) * perSecond) / 1000);
      this.buckets.delete(source);
    } else if (this.buckets.size >= this.settings.maxSources) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
    const allowed = tokens >= 1;
    this.buckets.set(source, { tokens: allowed ? tokens - 1 : tokens, at: now });
    return allowed;
  }

  /** How many sources are remembered now. */
  get size(): number {
    return this.buckets.size;
  }
}

/** The address a bucket is kept for: IPv4 as it is (also when mapped into IPv6), IPv6 cut to its /64. */
export function sourceOf(address: string): string {
  const plain = address.toLowerCase().replace(/%.*$/, '');
  const mapped = plain.replace(/^::ffff:/, '');
  if (isIPv4(mapped)) return mapped;
  const [head = '', tail = ''] = plain.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = plain.includes('::')
    ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((group) => group.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
