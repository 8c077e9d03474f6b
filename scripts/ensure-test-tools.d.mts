// Types of ensure-test-tools.mjs for the tests.
export interface Tool {
  /** the Debian package */
  pkg: string;
  /** what npm test needs it for */
  why: string;
  /** its path when found, else null */
  find: () => string | null;
  /** what to do when it cannot be installed */
  help: string;
}
export interface ToolsIo {
  tools?: Tool[];
  isRoot?: boolean;
  aptGet?: string | null;
  run?: (cmd: string, args: string[]) => number | null;
  write?: (text: string) => void;
}
export function installLine(tools: Array<Pick<Tool, 'pkg' | 'why'>>): string;
export function ensureTestTools(io?: ToolsIo): number;
