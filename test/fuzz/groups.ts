/**
 * The request groups the fuzzer draws from (test/fuzz/arbitraries.ts builds each). Apart from the
 * arbitraries, so `npm run fuzz -- --help` checks `--only` without loading the fuzzer.
 */
/** herald: Herald's API; control: the sandbox's control route; sandbox: its other routes; gateway: its WebSocket. */
export const CATEGORY_GROUPS = ['herald', 'control', 'sandbox', 'gateway'] as const;
export type CategoryGroup = (typeof CATEGORY_GROUPS)[number];
