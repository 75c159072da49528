import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransportError } from '../src/platforms/platform.js';
import { admin, archiveHarness, GUILD, messageWith, type ArchiveHarness } from './support/archive.js';

const CHANNEL = '345678901234567950';

describe('a long scrape and its retries', () => {
  let h: ArchiveHarness;
  beforeAll(async () => {
    // The harness allows 3 attempts; the channel has 6 pages of 100 messages.
    h = await archiveHarness({ limits: { limitBytes: 1_000_000, warnPercent: 80, overrunPercent: 100 }, policy: { hosts: [], trustedOrigins: [], maxBytes: 4096 } });
    h.memory.addChannel(CHANNEL, { guildId: GUILD });
    h.memory.archived.set(CHANNEL, Array.from({ length: 600 }, (_, i) => messageWith(CHANNEL, i, `https://cdn.example.com/${i}.png`)));
  }, 120_000);
  afterAll(async () => h?.close());

  it('a transient failure after many good steps is retried, not final: only failures in a row count', async () => {
    const reads = { count: 0, failed: 0 };
    const read = h.memory.pages.pageBefore;
    h.memory.pages.pageBefore = async (channelId, beforeId, limit, signal) => {
      reads.count++;
      // The fifth read (past the 3 attempts a scrape is allowed) fails once, as a dropped connection would.
      if (reads.count === 5) {
        reads.failed++;
        throw new TransportError({ kind: 'transient', detail: 'connection reset' });
      }
      return read(channelId, beforeId, limit, signal);
    };
    const { scrape } = await h.media.startScrape({ channelId: CHANNEL, mode: 'links' }, admin);
    h.start();
    const done = await h.settled(scrape.id);
    expect(reads.failed).toBe(1);
    expect(done.state).toBe('completed');
    expect(done.messagesSeen).toBe(600);
    expect(done.itemsFound).toBe(600);
  });
});
