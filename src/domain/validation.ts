/** Field rules shared by the HTTP schemas and the admin CLI, so both accept exactly the same values. */

// Deliberately plain: one @, no spaces, a dot in the domain. Deliverability is the mail server's business.
export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$';
const emailRegex = new RegExp(EMAIL_PATTERN);

export const MAX_EMAIL_LENGTH = 254;
export const MAX_NAME_LENGTH = 100;

export function isEmail(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && emailRegex.test(value);
}
