// An event kind (issue 50): everything svc makes of one kind of fact, in one object. Each kind is
// one file of this folder, collected in index.ts by kind; cloudevent.ts, slugs.ts, classify.ts,
// links.ts and routing.ts read the kind of a fact from there and hold no per-kind code.
import type { z } from 'zod';
import type { Fact } from '../../domain/facts.ts';
import type { ResourceName } from '../../domain/subscription.ts';

/** The fact of one kind. */
export type FactOf<K extends Fact['kind']> = Extract<Fact, { kind: K }>;

/** Classification into the (resource, op) pair of CONTRACT 6.1 / 6.2. */
export interface Classification {
  resource: string;
  op: string;
}

/** The entities an event's dashboard links point at (CONTRACT 6.2 `data.links`); absent: no link. */
export interface LinkTargets {
  install?: string;
  workflow?: string;
  sandbox?: string;
  component?: string;
}

/** The entities `match` tests (CONTRACT 6.3), and a webhook the event never goes to (CONTRACT 4.1). */
export interface MatchTargets {
  install?: string;
  component?: string;
  action?: string;
  not_to?: string;
}

/** What the event catalog says of a kind (CONTRACT 10.3): the type's meaning, its subject's shape, an example. */
export interface CatalogEntry<F extends Fact = Fact> {
  /** one or two sentences for a receiver's author */
  description: string;
  /** the subject with its variable parts named, e.g. `<org>/workflow/<workflow>/<transition>` (CONTRACT 6.2) */
  subject_pattern: string;
  /** a representative fact of the kind, classified (so that it makes an event); its org and time are replaced when sent */
  example: F;
}

/**
 * Every route an event of a kind can have for interests (CONTRACT 6.1): its resources and its
 * `event:` slugs without the prefix (the filters' path check asks the interests of each, over-
 * approximating: src/services/filter-paths.ts). None: never sent to webhooks by their interests.
 */
export interface EventRoutes {
  resources: readonly ResourceName[];
  events: readonly string[];
}

/** The entry of one kind, `F` its fact (FactOf<'workflow'>, …); EventKind alone takes any fact. */
export interface EventKind<F extends Fact = Fact> {
  kind: F['kind'];
  /** the CloudEvents type */
  type: string;
  /** the CloudEvents subject: `<org>/<kind>/<ids…>/<transition>` */
  subject(fact: F): string;
  data: {
    /**
     * The kind's own fields of `data`, in order: ceData puts kind, transition and org_id before
     * them and links after them (CONTRACT 6.2).
     */
    build(fact: F, dashboardUrl: string): Record<string, unknown>;
    /** the whole `data` of the kind's events (kind, transition and org_id first, links last) */
    schema: z.ZodType;
  };
  /** the `event:<…>` interest slug (spec 6.4) */
  slug(fact: F): string;
  /** every resource and slug its events can have (slug() and classify() of any fact of the kind) */
  routes: EventRoutes;
  /** the `outcome:<…>` interest slugs */
  outcomes(fact: F): string[];
  /** null: never delivered to webhooks (unless `direct`) */
  classify(fact: F): Classification | null;
  links(fact: F): LinkTargets;
  match(fact: F): MatchTargets;
  /** the kind's entry in the event catalog (CONTRACT 10.3, src/events/catalog.ts) */
  catalog: CatalogEntry<F>;
  /**
   * The event's ordering key (CONTRACT 10.1 `svcorderkey`): the install when svc knows it, else the
   * workflow (workflow and step events), the runner, the webhook (watchdog events); null: the event
   * carries no key and no sequence (ping).
   */
  orderKey(fact: F): string | null;
  /**
   * Sent only to one webhook by its own endpoint (ping), bypassing interests: made into an event
   * without a classification, and its interests are its event slug alone.
   */
  direct?: true;
}
