import type { StartedSandbox } from './sandbox-mode.js';

/**
 * The banner's `export` lines for another shell: where each place of this run is, under the names
 * the guides' commands use (docs/guides/), so they run as written whatever ports Herald took.
 * `HERALD_URL` is the API (the variable `herald mcp` reads too), `METRICS_URL` the metrics port
 * (status page and `/metrics`), `SANDBOX_URL` the first sandbox (the one on HERALD_SANDBOX_PORT)
 * and `<NAME>_SANDBOX_URL` each other one. None starts with a prefix Herald reads
 * (src/config-variables.ts), so a shell holding them starts Herald without a warning.
 */
export function placeExports(apiUrl: string | undefined, metricsUrl: string | undefined, sandboxes: readonly StartedSandbox[]): string[] {
  const line = (name: string, value: string): string => `  export ${name}=${value}`;
  return [
    ...(apiUrl !== undefined ? [line('HERALD_URL', apiUrl)] : []),
    ...sandboxes.map(({ name, sandbox }, i) => line(i === 0 ? 'SANDBOX_URL' : `${name.toUpperCase()}_SANDBOX_URL`, new URL(sandbox.url).origin)),
    ...(metricsUrl !== undefined ? [line('METRICS_URL', metricsUrl)] : []),
  ];
}
