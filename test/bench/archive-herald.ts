/**
 * `herald serve` for the bench's download scrape (archive-scrape.ts), with one addition: the
 * sandbox's CDN (BENCH_MEDIA_ORIGIN) is trusted as a media origin, as sandbox mode and the test
 * Herald (test/support/herald.ts) trust it; `herald serve` itself never trusts a private origin.
 * Prints the same "herald started" line as the CLI; SIGTERM closes it.
 */
import { startHerald } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/infra/log.js';

const origin = process.env['BENCH_MEDIA_ORIGIN'];
if (origin === undefined) throw new Error('BENCH_MEDIA_ORIGIN is not set');
const config = loadConfig(process.env);
const log = createLogger(config.logLevel);
const herald = await startHerald({ config, log, roles: { http: true, dispatcher: true }, mediaOrigins: [origin] });
log.info({ url: herald.url, metrics: herald.metricsUrl, store: herald.store.kind, role: 'serve' }, 'herald started');
process.once('SIGTERM', () => void herald.close().finally(() => process.exit(0)));
