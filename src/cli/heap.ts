// How eagerly V8 collects in the long-running processes (svc serve, svc worker). By default V8 lets
// its old space grow to up to four times what survived the last full collection before it collects
// again. svc keeps little alive (its windows are bounded: what is in flight, not what is queued),
// but at full delivery speed most of what it allocates lives a few hundred milliseconds (an attempt,
// a batch until its ack) and is promoted before it dies: the old space then fills with garbage, and
// the process's RSS grows by tens of MiB with the length of a busy spell, not with anything it
// holds. Measured (test/isolation/recovery-pacing.test.ts, RECOVERY_EVENTS=100000, NATS mode): RSS
// growth from warm 67–80 MiB by default, 14 and 8 MiB with the growing factor at 1.5 (the live
// heap stays ~20 MiB either way). The cost is more frequent full collections: see BENCHMARKS.md.
import v8 from 'node:v8';

/** The old space may grow to 1 + this/100 times what survived the last full collection. */
export const HEAP_GROWING_PERCENT = 50;

/** Set for this process and every thread it starts (V8 flags are process-wide); call before the work starts. */
export function collectEagerly(): void {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
