// Producer messages (CONTRACT 5.2), one schema per subject family.
import { z } from 'zod';
import { ID_RE } from './ids.ts';

const lifecycle = z.enum(['started', 'succeeded', 'failed', 'cancelled']);
const token = z.string().regex(ID_RE, 'must be lowercase [a-z0-9_], at most 64 characters');

export const jobResultSchema = z.object({
  status: lifecycle,
  error: z.string().max(4000).optional(),
  duration_ms: z.number().int().nonnegative().optional(),
  plan: z
    .object({
      changes: z.array(z.object({ address: z.string(), action: z.enum(['create', 'update', 'delete', 'replace', 'no-op']) })),
    })
    .optional(),
});

export const workflowMessageSchema = z
  .object({
    kind: z.enum(['workflow', 'workflow_step']),
    transition: lifecycle,
    workflow: z
      .object({
        id: token,
        type: z.string().min(1).max(100),
        owner_id: z.string().min(1).max(64),
        owner_type: z.enum(['installs', 'apps', 'app_branches']),
        parent: z
          .object({ workflow_id: z.string(), step_id: z.string(), kind: z.literal('workflow_step') })
          .nullable()
          .optional(),
        action_id: z.string().min(1).max(64).optional(),
      })
      .optional(),
    step: z
      .object({
        id: token,
        name: z.string().min(1).max(200),
        idx: z.number().int().nonnegative(),
        target_type: z.string().max(100).nullable().optional(),
        target_id: z.string().max(200).nullable().optional(),
        component_id: z.string().max(64).nullable().optional(),
        sandbox_id: z.string().max(64).nullable().optional(),
        execution_type: z.enum(['system', 'user', 'approval', 'skipped', 'hidden']).default('system'),
      })
      .optional(),
    error: z.string().max(4000).optional(),
    duration_ms: z.number().int().nonnegative().optional(),
  })
  .refine((m) => m.kind === 'workflow' || m.step !== undefined, { message: 'a workflow_step message needs step', path: ['step'] });

export const runnerMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('heartbeat'), process: z.enum(['running', 'missing']) }),
  z.object({ type: z.literal('inactive'), reason: z.string().max(1000).optional() }),
]);

export const healthMessageSchema = z.object({
  component_id: z.string().min(1).max(64),
  verdict: z.enum(['healthy', 'degraded', 'unhealthy', 'unknown']),
  reason: z.string().max(1000).optional(),
});

export type JobResult = z.infer<typeof jobResultSchema>;
export type WorkflowMessage = z.infer<typeof workflowMessageSchema>;
export type RunnerMessage = z.infer<typeof runnerMessageSchema>;
export type HealthMessage = z.infer<typeof healthMessageSchema>;
