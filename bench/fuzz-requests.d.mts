/** Types of fuzz-requests.mjs, for the TypeScript test that shares it. */
import type { Arbitrary } from 'fast-check';

export interface FuzzRequest {
  method: string;
  /** The path with its query string, percent-encoded (or deliberately not). */
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
}

export const HOSTILE_STRINGS: readonly string[];
export const HOSTILE_NUMBER_TEXTS: readonly string[];
export function toJsonText(value: unknown): string;
export function percentEncode(text: string): string;
export function fuzzRequests(
  document: object,
  options: { key: string; ids?: string[] },
): Arbitrary<FuzzRequest>;
export function problemWith(request: FuzzRequest, status: number, text: string): string | null;
export function describeRequest(request: FuzzRequest): string;
/** The example body the document shows for the create at `pathName`, through its `$ref`. */
export function createExample(document: object, pathName: string): unknown;
