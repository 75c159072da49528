import { createHash } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaDownloader, type DownloadPolicy, type StorageBudget } from '../src/modules/archive/media.downloader.js';

/**
 * A download whose request is aborted (its step's lease ended, or its timeout) just as its answer
 * arrives, while room for it is being reserved: the answer's stream can be destroyed before it is
 * read, and then reads as empty with no error. Found by the chaos campaign's archive phase as empty
 * files stored as items' content (the SHA-256 of zero bytes). Such a download must fail, never be
 * stored.
 */
describe('a download cut off while its room is reserved', () => {
  const BODY = Buffer.alloc(4_096, 7);
  const DIGEST = createHash('sha256').update(BODY).digest('hex');
  let server: http.Server;
  let origin: string;
  let mediaDir: string;

  beforeAll(async () => {
    // Headers at once, the body in two halves: the window where an abort meets a whole answer.
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': BODY.length });
      res.flushHeaders();
      setTimeout(() => res.write(BODY.subarray(0, 2_048)), 10);
      setTimeout(() => res.end(BODY.subarray(2_048)), 30);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    mediaDir = await mkdtemp(path.join(tmpdir(), 'herald-cut-'));
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(mediaDir, { recursive: true, force: true });
  });

  const policy = (): DownloadPolicy => ({ trustedOrigins: [origin], hosts: [], timeoutMs: 10_000, maxBytes: 1_000_000 });

  it('aborted at every moment around the answer, a download is either the whole file or a failure', { timeout: 60_000 }, async () => {
    const outcomes: Record<string, number> = {};
    // Densest where the answer ends (30 ms): the old code stored an empty file there, not every time.
    for (const abortAtMs of [12, 20, 26, ...Array.from({ length: 13 }, (_, k) => 28 + k), 45]) {
      for (const reserveMs of [0, 20, 35, 50, 80]) {
        const downloader = new MediaDownloader(mediaDir, policy());
        const lease = new AbortController();
        const timer = setTimeout(() => lease.abort(new Error('the step lease ended')), abortAtMs);
        const budget: StorageBudget = {
          reserve: async () => {
            await new Promise((resolve) => setTimeout(resolve, reserveMs));
            return { ok: true, reservation: 'room' };
          },
          release: async () => undefined,
        };
        const outcome = await downloader.download(`${origin}/photo.png`, lease.signal, budget);
        clearTimeout(timer);
        if (outcome.ok) {
          expect({ size: outcome.size, sha256: outcome.sha256 }, `aborted at ${abortAtMs} ms, room after ${reserveMs} ms`).toEqual({ size: BODY.length, sha256: DIGEST });
          expect(createHash('sha256').update(await readFile(path.join(mediaDir, outcome.path))).digest('hex')).toBe(DIGEST);
        }
        const key = outcome.ok ? 'stored whole' : 'failed';
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    }
    // And one never aborted is stored whole (the sweep's outcomes depend on the machine's load).
    const whole = await new MediaDownloader(mediaDir, policy()).download(`${origin}/photo.png`, new AbortController().signal, {
      reserve: async () => ({ ok: true, reservation: 'room' }),
      release: async () => undefined,
    });
    expect(whole.ok && { size: whole.size, sha256: whole.sha256 }, JSON.stringify(outcomes)).toEqual({ size: BODY.length, sha256: DIGEST });
  });
});
