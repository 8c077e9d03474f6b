// The filter form of a listing that is newest first unless `?order=oldest` (CONTRACT 7; the API is
// oldest first): the audit log and the event history.
import type { Child, FC } from 'hono/jsx';
import type { DashContext } from './session.ts';
import { LabeledInput } from './ui.tsx';

/** The listing's order: newest first unless `?order=oldest`. */
export const oldestFirst = (c: DashContext) => c.req.query('order') === 'oldest';

/** A GET form over `action` that keeps the order: its fields, then Filter and Clear (the order alone). */
export const FilterForm: FC<{ c: DashContext; action: string; label: string; children?: Child }> = ({ c, action, label, children }) => (
  <form method="get" action={action} class="stack" aria-label={label}>
    {oldestFirst(c) ? <input type="hidden" name="order" value="oldest" /> : null}
    {children}
    <div class="actions">
      <button type="submit">Filter</button>
      <a class="button secondary" href={`${action}${oldestFirst(c) ? '?order=oldest' : ''}`}>
        Clear
      </a>
    </div>
  </form>
);

/** A text field of a filter form: its label, the input (empty when not given) and what follows it (a hint). */
export const FilterField: FC<{
  id: string;
  label: string;
  name: string;
  value: string | undefined;
  maxlength: number;
  placeholder?: string;
  describedBy?: string;
  children?: Child;
}> = (p) => (
  <LabeledInput
    id={p.id}
    label={p.label}
    type="text"
    name={p.name}
    value={p.value ?? ''}
    maxlength={p.maxlength}
    placeholder={p.placeholder}
    aria-describedby={p.describedBy}
  >
    {p.children}
  </LabeledInput>
);
