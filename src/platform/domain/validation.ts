/** Field rules shared by the HTTP schemas and the admin CLI, so both accept exactly the same values. */

// Deliberately plain: one @, no spaces or control characters, a dot in the domain. Deliverability is
// the mail server's business.
export const EMAIL_PATTERN =
  '^[^\\s@\\u0000-\\u001F\\u007F-\\u009F]+@[^\\s@\\u0000-\\u001F\\u007F-\\u009F]+\\.[^\\s@\\u0000-\\u001F\\u007F-\\u009F]+$';
const emailRegex = new RegExp(EMAIL_PATTERN, 'u');

export const MAX_EMAIL_LENGTH = 254;
export const MAX_NAME_LENGTH = 100;

/**
 * Names people give things (API keys, accounts, companies) end up in terminals, logs and web pages, so
 * they must be text that shows as what it is: no control characters (NUL, ESC, newlines: Unicode Cc),
 * no invisible format characters (bidi overrides such as U+202E, zero-width characters, soft hyphens:
 * Cf), no line or paragraph separators (Zl, Zp), no lone surrogate halves (Cs), and no white space at
 * either end. Every other character is allowed, letters of every script and emoji included. Identifiers
 * of machines (instance and SSH key names) keep their narrower rule.
 */
const printableNameRegex = /^(?!\s)[^\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]*(?<!\s)$/u;

/**
 * The same rule as a JSON Schema pattern that means the same with or without the regular expressions'
 * Unicode flag (validators and code generators differ there): Cc, Zl, Zp and every Cf character of the
 * Basic Multilingual Plane spelled out. The few Cf characters beyond it and lone surrogates are left to
 * isPrintableName, which the services apply as well.
 */
export const PRINTABLE_NAME_PATTERN =
  '^(?!\\s)[^\\u0000-\\u001F\\u007F-\\u009F\\u00AD\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u0890\\u0891\\u08E2\\u180E' +
  '\\u200B-\\u200F\\u2028-\\u202E\\u2060-\\u2064\\u2066-\\u206F\\uFEFF\\uFFF9-\\uFFFB]*(?<!\\s)$';

export function isEmail(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && emailRegex.test(value);
}

/** The longest local part (before the @) and domain of an address (RFC 5321 §4.5.3.1). */
export const MAX_LOCAL_PART_LENGTH = 64;
export const MAX_DOMAIN_LENGTH = 253;
const MAX_LABEL_LENGTH = 63;

// A dot-atom of RFC 5322's atext: ASCII letters, digits and ! # $ % & ' * + / = ? ^ _ ` { | } ~ -.
const localPartRegex = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const labelRegex = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;

/**
 * An address mail is sent to on a user's word (alert recipients): a plain local part at a DNS host name.
 * No IP literal (`a@[127.0.0.1]` would aim the relay at an address of our choosing), no quoted local
 * part, no encoded word (`=?utf-8?…?=`, which a relay may decode into other addresses), nothing beyond
 * ASCII; the domain is dot-separated labels of letters, digits and inner hyphens (1–63 each, two or
 * more) whose last, the top-level domain, is not all digits (so no dotted IPv4 either).
 */
export function isMailboxAddress(value: string): boolean {
  if (value.length > MAX_EMAIL_LENGTH) return false;
  const at = value.lastIndexOf('@');
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  if (at < 1 || local.length > MAX_LOCAL_PART_LENGTH || domain.length > MAX_DOMAIN_LENGTH) return false;
  if (!localPartRegex.test(local) || local.includes('=?')) return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  if (!labels.every((label) => label.length <= MAX_LABEL_LENGTH && labelRegex.test(label))) return false;
  return !/^[0-9]+$/.test(labels[labels.length - 1] as string);
}

/** Length in characters as JSON Schema counts them (code points, not UTF-16 units). */
function codePoints(value: string): number {
  let count = 0;
  for (const _ of value) count++;
  return count;
}

/** The printable-name rule above, 1 to MAX_NAME_LENGTH characters. */
export function isPrintableName(value: string): boolean {
  const length = codePoints(value);
  return length >= 1 && length <= MAX_NAME_LENGTH && printableNameRegex.test(value);
}

/** What to say when a name breaks the rule. */
export const PRINTABLE_NAME_RULE = `1 to ${MAX_NAME_LENGTH} printable characters, without control or invisible formatting characters and without white space at either end`;

/** The printable-name rule for longer text (descriptions): up to `maxLength` characters, or empty. */
export function isPrintableText(value: string, maxLength: number): boolean {
  return value === '' || (codePoints(value) <= maxLength && printableNameRegex.test(value));
}
