// Dry runs of filters and recipients of an event (CONTRACT 10.2). In: the dry runs' bodies (the
// filter itself: src/domain/subscription.ts filterSchema). Out: the verdicts.
import { z } from 'zod';
import { filterSchema, interestsSchema, matchSchema } from '../domain/subscription.ts';
import { apiSchemas, described, timeBoundSchema } from './common.ts';

// ------------------------------------------------------------------ In

const sources = {
  event: described(z.record(z.string(), z.unknown()), 'a CloudEvent as delivered').optional(),
  event_id: described(z.string().min(1).max(200), 'a kept event of the org').optional(),
  since: timeBoundSchema('kept events emitted at or after (at most 10,000 examined, the oldest first)').optional(),
  until: timeBoundSchema('events emitted before').optional(),
};

/** POST /v1/orgs/current/webhooks/test-filter: one of the sources. */
export const testFilterBodySchema = z.strictObject({
  filter: filterSchema.nullable(),
  interests: interestsSchema.optional(),
  match: matchSchema.nullable().optional(),
  ...sources,
});

/** POST …/webhooks/{id}/test-filter: the webhook's own subscription; a `filter` given is tried in place of its own. */
export const testWebhookFilterBodySchema = z.strictObject({
  filter: filterSchema.nullable().optional(),
  ...sources,
});

// ------------------------------------------------------------------ Out

const decidedBy = described(z.string(), '`interests`, `match`, or the filter clause that decided (`data.install.labels.ring.$in`)');

export const dryRunSchema = z
  .object({
    examined: z.number().int(),
    matched: z.number().int(),
    results: z.array(
      z.object({
        event_id: z.string(),
        type: z.string(),
        subject: z.string(),
        matched: z.boolean(),
        decided_by: decidedBy,
      }),
    ),
  })
  .register(apiSchemas, { id: 'FilterDryRun' });

export const recipientsSchema = z
  .object({ data: z.array(z.object({ webhook_id: z.string(), matched: z.boolean(), decided_by: decidedBy })) })
  .register(apiSchemas, { id: 'EventRecipients' });
