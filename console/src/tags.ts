/**
 * Tags as the console's forms take them: one line of `key=value` pairs separated by commas
 * (`env=prod, team=web`); a pair without `=` is a key with an empty value.
 */

export function parseTags(text: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const [key, ...value] = pair.split('=');
    if (key?.trim()) tags[key.trim()] = value.join('=').trim();
  }
  return tags;
}

/** The line parseTags reads back to the same tags. */
export function formatTags(tags: Record<string, string>): string {
  return Object.entries(tags)
    .map(([key, value]) => (value ? `${key}=${value}` : key))
    .join(', ');
}
