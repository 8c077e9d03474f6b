// Ids for tests: a prefix and random hex, so that tests sharing a server or a database never collide.
import { randomBytes } from 'node:crypto';

export const rid = (prefix: string): string => `${prefix}_${randomBytes(6).toString('hex')}`;
