// Sizes as an operator reads them, in one unit system everywhere: binary (KiB, MiB, GiB), as
// Herald's limits are set (HERALD_FILE_MAX_BYTES, 25 MiB). The status page
// (src/infra/http/status-page.ts) and every web page print through this, so one size reads the
// same everywhere. Pure: browser bundles import it too.

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB'] as const;

/** 512 B, 1.5 KiB, 2.1 MiB, 3.0 GiB. */
export function formatBytes(n: number): string {
  if (!(n >= 1024)) return `${Math.round(n)} B`;
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(1)} ${UNITS[i] ?? 'TiB'}`;
}
