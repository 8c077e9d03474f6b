// An app's change windows (CONTRACT 4.3 "Change windows"). In: create a window. Out: a window, the
// app's windows.
import { z } from 'zod';
import { durationMs } from '../domain/duration.ts';
import { isTimeZone, MAX_WINDOW_MS, MIN_WINDOW_MS, RUN_KINDS, startMinutes, WEEKDAYS, WINDOW_KINDS } from '../domain/change-windows.ts';
import { apiSchemas, described, selectorSchema, unique } from './common.ts';

// ------------------------------------------------------------------ In

export const createChangeWindowSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  kind: z.enum(WINDOW_KINDS),
  days: z.array(z.enum(WEEKDAYS)).min(1).max(7).refine(unique, 'days must not repeat'),
  start: z.string().refine((s) => startMinutes(s) !== null, 'start must be HH:MM (00:00 to 23:59)'),
  duration: z.string().refine((d) => {
    const ms = durationMs(d);
    return ms !== null && ms >= MIN_WINDOW_MS && ms <= MAX_WINDOW_MS;
  }, 'duration must be from 15m to 24h (e.g. 2h)'),
  time_zone: z.string().refine(isTimeZone, 'time_zone must be an IANA time zone name (e.g. America/Los_Angeles)'),
  install_ids: z.array(z.string().min(1).max(64)).min(1).max(1000).optional(),
  selector: selectorSchema.optional(),
  applies_to: z.array(z.enum(RUN_KINDS)).min(1).refine(unique, 'applies_to must not repeat').optional(),
});
export type CreateChangeWindow = z.infer<typeof createChangeWindowSchema>;

// ------------------------------------------------------------------ Out

export const changeWindowSchema = z
  .object({
    window_id: z.string(),
    app_id: z.string(),
    name: z.string(),
    kind: z.enum(WINDOW_KINDS),
    days: z.array(z.enum(WEEKDAYS)),
    start: z.string(),
    duration: described(z.string(), 'as given'),
    time_zone: z.string(),
    install_ids: z.array(z.string()).nullable(),
    selector: z.object({ match_labels: z.record(z.string(), z.string()) }).nullable(),
    applies_to: described(z.array(z.enum(RUN_KINDS)), 'the run kinds it holds (branch runs unless it was created naming rollbacks)'),
    created_at: z.string(),
  })
  .register(apiSchemas, { id: 'ChangeWindow' });

export type ChangeWindowOut = z.infer<typeof changeWindowSchema>;

export const changeWindowListSchema = z.array(changeWindowSchema).register(apiSchemas, { id: 'ChangeWindowList' });
