// Classification of a fact into the (resource, op) pair of CONTRACT 6.1 / 6.2; each kind's is in kinds/.
// null means the event is never delivered to webhooks (drift workflow lifecycle, unknown workflow
// types whose step target type does not classify them). Ping has no classification: it is sent
// only by the ping endpoint, bypassing interests.
import type { Fact } from '../domain/facts.ts';
import { kindOf, type Classification } from './kinds/index.ts';

export type { Classification } from './kinds/index.ts';
export { DRIFT_WORKFLOW_TYPES, classifyStep, classifyWorkflow } from './kinds/shared.ts';

export function classify(fact: Fact): Classification | null {
  return kindOf(fact).classify(fact);
}
