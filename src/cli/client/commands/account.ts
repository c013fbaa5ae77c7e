/** `nimbus account …`: the account, its quotas and its rate-limit status. */
import { Command } from 'commander';
import { type Column, printList } from '../output.js';
import { withSession } from '../session.js';
import { updateCommand } from './resource-commands.js';
import { addCommands, defined, example, printItem } from './shared.js';

const QUOTA_COLUMNS: Column[] = [
  { header: 'QUOTA', value: (q) => q.name },
  { header: 'USED', value: (q) => q.used },
  { header: 'LIMIT', value: (q) => q.limit },
];

export function accountCommand(): Command {
  const group = new Command('account').description('your account, quotas and rate limit');
  example(group, 'nimbus account get', 'nimbus account quota');

  const get = new Command('get').description('show the account');
  example(get, 'nimbus account get -o json');
  get.action(
    withSession(async (session) => printItem(session, (await session.nimbus.get('/v1/account')).data)),
  );

  const update = updateCommand({
    description: "change the account's name and contact addresses",
    options: (command) =>
      command
        .option('--name <name>', 'account name')
        .option('--email <email>', 'contact e-mail')
        .option('--company <company>', 'company name')
        .option('--billing-email <email>', 'where invoices go'),
    examples: ['nimbus account update --company "Example Ltd" --billing-email billing@example.com'],
    path: '/v1/account',
    body: (flags: { name?: string; email?: string; company?: string; billingEmail?: string }) =>
      defined({
        name: flags.name,
        email: flags.email,
        company: flags.company,
        billing_email: flags.billingEmail,
      }),
  });

  const quota = new Command('quota').description('quotas: limit and use of each');
  example(quota, 'nimbus account quota', 'nimbus account quota -o json');
  quota.action(
    withSession(async (session) => {
      const { data } = await session.nimbus.get('/v1/account/quota');
      printList(data, QUOTA_COLUMNS, session.out);
    }),
  );

  const rateLimit = new Command('rate-limit').description(
    'requests left this hour, burst, and when the window resets',
  );
  example(rateLimit, 'nimbus account rate-limit');
  rateLimit.action(
    withSession(async (session) =>
      printItem(session, (await session.nimbus.get('/v1/account/rate-limit')).data),
    ),
  );

  return addCommands(group, get, update, quota, rateLimit);
}
