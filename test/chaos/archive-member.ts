import { startHerald } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/infra/log.js';

/**
 * A member of the archive phase's fleet: `herald serve|dispatch` as the CLI starts it
 * (src/cli.ts: the same config, the same startHerald, the same "herald started" line), with one
 * difference, the media origins the downloader trusts: the sandbox's CDN and the phase's file
 * server, as sandbox mode trusts its sandbox's (the CLI trusts none outside sandbox mode, and the
 * fleet's processes run beside a sandbox they did not start).
 *
 * The fleet runs it as the process's main module through tsx (`node --import tsx
 * test/chaos/archive-member.ts serve`; fleet.ts MemberSpec.entry). It was once preloaded before the
 * CLI through NODE_OPTIONS (`--import`): with tsx's compile cache empty, as on a clean checkout
 * whose tests start Herald from dist/, that start-up hung before its first line, every time, and
 * the archive phase timed out in CI. A SIGKILL ends it like any member.
 */

const command = process.argv.includes('dispatch') ? 'dispatch' : 'serve';
const origins = (process.env['CHAOS_MEDIA_ORIGINS'] ?? '').split(',').filter((o) => o !== '');
const config = loadConfig();
const log = createLogger(config.logLevel);
const herald = await startHerald({ config, log, roles: { http: command === 'serve', dispatcher: true }, mediaOrigins: origins });
log.info({ url: herald.url, metrics: herald.metricsUrl, store: herald.store.kind, role: command }, 'herald started');
await new Promise<void>((resolve) => {
  const stop = (): void => void herald.close().finally(() => resolve());
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
});
log.info('stopped');
process.exit(0);
