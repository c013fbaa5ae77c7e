import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ACCOUNT_STATUSES, PLANS, QUOTA_NAMES } from '../../platform/domain/plans.js';
import { EMAIL_PATTERN, MAX_EMAIL_LENGTH } from '../../platform/domain/validation.js';
import { ok } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses } from '../../platform/http/responses.js';
import { Envelope, PrintableName, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { RateLimitService } from '../../platform/rate-limits/rate-limits.js';
import type { AccountService } from './service.js';

const Email = Type.String({
  pattern: EMAIL_PATTERN,
  maxLength: MAX_EMAIL_LENGTH,
  description: 'E-mail address',
});

export const AccountSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    email: Type.String(),
    company: Type.Union([Type.String(), Type.Null()]),
    billing_email: Type.Union([Type.String(), Type.Null()]),
    plan: StringEnum(PLANS),
    status: StringEnum(ACCOUNT_STATUSES),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Account', title: 'Account' },
);

const AccountPatch = Type.Object(
  {
    name: Type.Optional(PrintableName()),
    email: Type.Optional(Email),
    company: Type.Optional(Type.Union([PrintableName(), Type.Null()])),
    billing_email: Type.Optional(Type.Union([Email, Type.Null()])),
  },
  { title: 'AccountUpdate', additionalProperties: false, minProperties: 1 },
);

const Quota = Type.Object({
  name: StringEnum(QUOTA_NAMES),
  limit: Type.Integer(),
  used: Type.Integer(),
});

const RateLimitStatus = Type.Object({
  limit: Type.Integer({ description: 'Requests allowed per hour' }),
  remaining: Type.Integer({ description: 'Requests left in the current hour window' }),
  reset: Type.Integer({ description: 'Unix time (seconds) at which the window ends' }),
  burst: Type.Integer({ description: 'Largest number of requests that may arrive at once' }),
  burst_remaining: Type.Integer({ description: 'Requests that may be sent at once right now' }),
  window_seconds: Type.Integer(),
});

export interface AccountRoutesDeps {
  accounts: AccountService;
  quotas: QuotaService;
  rateLimits: RateLimitService;
}

export const accountRoutes: FastifyPluginAsyncTypebox<AccountRoutesDeps> = async (
  app,
  { accounts, quotas, rateLimits },
) => {
  app.get(
    '/account',
    {
      schema: {
        tags: ['account'],
        summary: 'Get account info',
        description:
          "The account the API key belongs to: name, e-mail addresses, plan and status. It is read from the key's " +
          'verified snapshot, so it costs no store query.',
        response: { 200: described(Envelope(AccountSchema), 'The account') },
      },
      config: { permission: ['account', 'read'] },
    },
    // Synchronous: nothing to wait for, and Fastify then sends the value without a promise turn.
    (request) => ok(request, accounts.current(principalOf(request))),
  );

  app.patch(
    '/account',
    {
      schema: {
        tags: ['account'],
        summary: 'Update account (name, email, company, billing_email; the plan is changed by the operator)',
        description:
          'Changes any of `name`, `email`, `company` and `billing_email` (the last two accept null). Plan and ' +
          'status belong to the operator and are refused as unknown fields. The e-mail address is a contact, not ' +
          'an identity: accounts may share one, and whether another account uses it is never told.',
        body: AccountPatch,
        response: {
          200: described(Envelope(AccountSchema), 'The account as changed'),
          ...errorResponses(),
        },
      },
      config: { permission: ['account', 'write'] },
    },
    async (request) => ok(request, await accounts.update(principalOf(request).accountId, request.body)),
  );

  app.get(
    '/account/quota',
    {
      schema: {
        tags: ['account'],
        summary: 'Get quotas',
        description:
          "Every quota of the account with its limit (the plan's, or the operator's override) and how much is used.",
        response: { 200: described(Envelope(Type.Array(Quota)), 'One entry per quota') },
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => ok(request, await quotas.list(principalOf(request).accountId)),
  );

  app.get(
    '/account/rate-limit',
    {
      schema: {
        tags: ['account'],
        summary: 'Get rate-limit status (does not count against the limit)',
        description:
          'The hourly window and the burst bucket as they stand, without spending a request from either.',
        response: { 200: described(Envelope(RateLimitStatus), 'The rate-limit budget of the account') },
      },
      config: { permission: ['account', 'read'], rateLimit: 'peek' },
    },
    async (request) => {
      const decision = await rateLimits.peekForAccount(principalOf(request));
      return ok(request, {
        limit: decision.limit,
        remaining: decision.remaining,
        reset: decision.reset,
        burst: decision.burst,
        burst_remaining: decision.burstRemaining,
        window_seconds: 3600,
      });
    },
  );
};
