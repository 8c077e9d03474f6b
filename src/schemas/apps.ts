// Apps, their configs and branches (CONTRACT 4.2). In: create an app, a config, a branch; veto a
// config; the apps' list query. Out: an app, an app config (its components and actions as stored,
// its veto), a branch.
import { z } from 'zod';
import { apiSchemas, described, id, json, labels, name, pageLimit, selectorSchema, storedLabels, timestamp } from './common.ts';

// ------------------------------------------------------------------ In

export const createAppSchema = z.strictObject({ name });

export const appListQuerySchema = z.object({
  after: id.describe('the app_id of the last app of the previous page: the apps created before it').optional(),
  limit: pageLimit.optional(),
});

const componentSpecOf = (l: z.ZodType<Record<string, string>>) =>
  z.strictObject({
    name,
    type: z.string().max(200).optional(),
    labels: l.optional(),
    values: z.record(z.string(), z.unknown()).optional(),
  });

const actionSpecOf = (l: z.ZodType<Record<string, string>>) =>
  z.strictObject({
    name,
    labels: l.optional(),
    inputs: z.record(z.string().min(1), z.strictObject({ required: z.boolean().optional() })).optional(),
  });

/** A component of a config as a request sets it (labels within CONTRACT 8). */
export const componentSpecSchema = componentSpecOf(labels);
/** An action of a config as a request sets it (labels within CONTRACT 8). */
export const actionSpecSchema = actionSpecOf(labels);

export const appConfigSchema = z
  .strictObject({
    sandbox: z.record(z.string(), z.unknown()).optional(),
    components: z.array(componentSpecSchema),
    actions: z.array(actionSpecSchema).optional(),
    inputs: z.record(z.string(), z.unknown()).optional(),
  })
  .superRefine((c, ctx) => {
    const dup = (list: Array<{ name: string }>, path: string) => {
      const seen = new Set<string>();
      list.forEach((x, i) => {
        if (seen.has(x.name)) ctx.addIssue({ code: 'custom', path: [path, i, 'name'], message: `duplicate ${path} name ${x.name}` });
        seen.add(x.name);
      });
    };
    dup(c.components, 'components');
    dup(c.actions ?? [], 'actions');
  });

export const createBranchSchema = z.strictObject({
  name,
  install_groups: z
    .array(
      z
        .strictObject({ name, install_ids: z.array(id).optional(), selector: selectorSchema.optional() })
        .refine((g) => g.install_ids !== undefined || g.selector !== undefined, 'a group needs install_ids or a selector'),
    )
    .min(1),
});

export const vetoSchema = z.strictObject({ reason: z.string().trim().min(1).max(1000) });

// ------------------------------------------------------------------ Out

export const appSchema = z
  .object({
    app_id: z.string(),
    org_id: described(z.string().optional(), 'returned by GET only'),
    name: z.string(),
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'App' });

export const appListSchema = z.array(appSchema);

/** A config's body as stored and returned (labels read back without the limits of CONTRACT 8). */
export const configBodyShape = {
  sandbox: json.optional(),
  components: z.array(componentSpecOf(storedLabels).register(apiSchemas, { id: 'ComponentSpec' })),
  actions: z.array(actionSpecOf(storedLabels).register(apiSchemas, { id: 'ActionSpec' })).optional(),
  inputs: json.optional(),
};

export const vetoViewSchema = z.object({ reason: z.string(), at: timestamp }).register(apiSchemas, {
  id: 'Veto',
  description: 'why and since when an app config is vetoed: applying it is 409 vetoed (CONTRACT 4.3)',
});

export const appConfigViewSchema = z
  .object({
    app_config_id: z.string(),
    app_id: z.string(),
    version: z.number().int(),
    ...configBodyShape,
    created_at: timestamp,
    vetoed: vetoViewSchema.nullable(),
  })
  .register(apiSchemas, { id: 'AppConfig' });

export type AppConfigOut = z.infer<typeof appConfigViewSchema>;

export const appConfigListSchema = z.array(appConfigViewSchema);

export const branchSchema = z
  .object({
    app_branch_id: z.string(),
    app_id: z.string(),
    org_id: z.string(),
    name: z.string(),
    install_groups: z.array(
      z.object({
        name: z.string(),
        install_ids: z.array(z.string()).optional(),
        selector: z.object({ match_labels: storedLabels }).optional(),
      }),
    ),
    created_at: timestamp,
  })
  .register(apiSchemas, { id: 'AppBranch' });
