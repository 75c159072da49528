import pg from 'pg';
import { sleep } from './campaign.js';

/**
 * Stale writes, seen in the store while they happen: the `deliveries` rows are read a few times a
 * second and each one's first `delivered` state (status and url) is remembered; any later read that
 * shows another status or url is a write that landed after the outcome was committed (a process
 * that stalled past its lease and carried on). A later write that put the first state back would
 * hide it from the end's check, so the watch keeps what it saw.
 */
export class StaleWatch {
  private readonly first = new Map<string, string>();
  /** request_id → what changed, the first time it did. */
  readonly changed = new Map<string, string>();
  private running = true;
  private readonly loop: Promise<void>;

  constructor(private readonly databaseUrl: string) {
    this.loop = this.watch();
  }

  private async watch(): Promise<void> {
    while (this.running) {
      const client = new pg.Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 1_000 });
      try {
        // A broken connection (PostgreSQL restarted, a partition) ends this client; the loop opens another.
        client.on('error', () => undefined);
        await client.connect();
        while (this.running) {
          const { rows } = await client.query<{ request_id: string; status: string; url: string | null }>('select request_id, status, url from deliveries');
          this.observe(rows, Date.now());
          await sleep(300);
        }
      } catch {
        await sleep(300);
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  }

  /** One read of the rows (exported for the verifier's tests). */
  observe(rows: readonly { request_id: string; status: string; url: string | null }[], at: number): void {
    for (const r of rows) {
      const now = `${r.status} ${r.url ?? ''}`.trim();
      const was = this.first.get(r.request_id);
      if (was === undefined) {
        if (r.status === 'delivered') this.first.set(r.request_id, now);
        continue;
      }
      if (now !== was && !this.changed.has(r.request_id)) this.changed.set(r.request_id, `row was ${was}, then ${now} (${new Date(at).toISOString()})`);
    }
  }

  async stop(): Promise<ReadonlyMap<string, string>> {
    this.running = false;
    await this.loop;
    return this.changed;
  }
}
