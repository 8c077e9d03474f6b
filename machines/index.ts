export * from './advance.ts';
export * from './step.ts';
export * from './workflow.ts';
export * from './runner.ts';
export * from './health.ts';
export * from './health-gate.ts';
export * from './deploy-batch.ts';
export * from './webhook-watchdog.ts';
