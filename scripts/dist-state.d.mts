// Types of dist-state.mjs for the tests.
export const SOURCE_DIRS: string[];
export const BUILD_CONFIGS: string[];
export const STAMP: string;
export const ENTRY: string;
export function distState(root: string): { state: 'missing' | 'stale' | 'fresh'; sources: boolean; newer?: string };
