import { Counter, Gauge, type Registry } from 'prom-client';
import { addStatusPanels, ScrapeRead } from '../../infra/metrics.js';
import type { ScrapeState } from './archive.table.js';

const SCRAPE_STATES: readonly ScrapeState[] = ['running', 'paused', 'stopped', 'completed', 'failed'];

export interface ArchiveTotals {
  scrapes: { state: ScrapeState; scrapes: number; items: number; errors: number }[];
  storedBytes: number;
}

/**
 * The media archive's figures, read from the database at scrape time like the outbox's (every
 * process reports the same shared archive: aggregate with max): scrapes by state, the items they
 * found, the items refused or failed, and the bytes stored. One read per 5 s at most, bounded to
 * 1 s; a failed read drops the series and is counted, rather than report stale numbers.
 */
export function registerArchiveMetrics(registry: Registry, read: () => Promise<ArchiveTotals>): void {
  const reading = new ScrapeRead(read, { maxAgeMs: 5_000, timeoutMs: 1_000 });
  const registers = [registry];
  const failures = new Counter({ name: 'herald_archive_read_failures_total', help: 'Scrapes whose read of the media archive\'s figures failed or timed out', registers });
  /** A gauge set from the latest reading at each scrape; the first one read counts a failed reading. */
  const gauge = (name: string, help: string, labelNames: string[], set: (g: Gauge, r: ArchiveTotals) => void, countFailure = false): void =>
    void new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        const r = await reading.get();
        this.reset();
        if (r === undefined) {
          if (countFailure) failures.inc();
          return;
        }
        set(this, r);
      },
    });
  gauge('herald_archive_scrapes', 'Scrapes of the media archive by state (running, paused, stopped, completed, failed)', ['state'], (g, r) => {
    for (const state of SCRAPE_STATES) g.set({ state }, 0);
    for (const row of r.scrapes) g.set({ state: row.state }, row.scrapes);
  }, true);
  gauge('herald_archive_items_found', 'Media items the kept scrapes found (attachments, embeds, links)', [], (g, r) => g.set(r.scrapes.reduce((n, row) => n + row.items, 0)));
  gauge('herald_archive_item_errors', 'Items of the kept scrapes whose download was refused or failed', [], (g, r) => g.set(r.scrapes.reduce((n, row) => n + row.errors, 0)));
  gauge('herald_archive_stored_bytes', 'Bytes of the files the archive stores (each file once, however many items share it)', [], (g, r) => g.set(r.storedBytes));
  addStatusPanels(
    registry,
    { section: 'archive', title: 'Scrapes running', metric: 'herald_archive_scrapes', show: 'sum', where: (l) => l['state'] === 'running' },
    { section: 'archive', title: 'Items found per minute', metric: 'herald_archive_items_found', show: 'perMinute', unit: '/min' },
    { section: 'archive', title: 'Items refused or failed', metric: 'herald_archive_item_errors', show: 'sum' },
    { section: 'archive', title: 'Stored', metric: 'herald_archive_stored_bytes', show: 'sum', unit: 'bytes' },
  );
}
