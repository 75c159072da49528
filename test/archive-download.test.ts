import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DISCORD_MEDIA_HOSTS, MediaDownloader, systemNetwork, type ConnectTarget, type DownloadNetwork, type ResolvedAddress, type StorageBudget } from '../src/modules/archive/media.downloader.js';
import { admin, archiveHarness, messageWith, type ArchiveHarness } from './support/archive.js';

/**
 * The download path Herald takes against the real Discord CDN (not the sandbox's exempt origin):
 * an allowed https host, its DNS answers checked against the address policy, the connection opened
 * to the checked address itself, TLS verified for the host's name, the bytes stored. The test owns
 * the network: its resolver answers public addresses, and only inside the test is such an address
 * routed to a local TLS server holding a certificate for cdn.discordapp.com.
 */
const fixtures = path.join(import.meta.dirname, 'fixtures', 'tls');
const cdnCert = readFileSync(path.join(fixtures, 'cdn-cert.pem'));
const otherCert = readFileSync(path.join(fixtures, 'other-cert.pem'));

/** Public addresses the test's resolver answers, and where the test routes each. */
const CDN_ADDRESS = '162.159.130.233';
const WRONG_CERT_ADDRESS = '162.159.134.233';
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(3_000, 42)]);

async function tlsServer(name: 'cdn' | 'other', seen: { host: string | undefined; path: string | undefined }[]): Promise<https.Server> {
  const server = https.createServer({ key: readFileSync(path.join(fixtures, `${name}-key.pem`)), cert: readFileSync(path.join(fixtures, `${name}-cert.pem`)) }, (req, res) => {
    seen.push({ host: req.headers.host, path: req.url });
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
    res.end(PNG);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

function portOf(server: https.Server): number {
  return (server.address() as AddressInfo).port;
}

/** The test's network: a resolver it controls, and a route from a checked public address to a local server. */
class TestNetwork implements DownloadNetwork {
  readonly resolved: string[] = [];
  readonly connected: ConnectTarget[] = [];
  readonly answers = new Map<string, ResolvedAddress[][]>();
  private readonly system = systemNetwork({ ca: [cdnCert, otherCert] });

  constructor(private readonly routes: Map<string, number>) {}

  async resolve(hostname: string): Promise<ResolvedAddress[]> {
    this.resolved.push(hostname);
    const queue = this.answers.get(hostname) ?? [];
    // Successive lookups can answer differently (DNS rebinding): the last answer repeats.
    return (queue.length > 1 ? queue.shift() : queue[0]) ?? [];
  }

  connect(target: ConnectTarget) {
    this.connected.push(target);
    const port = this.routes.get(target.address);
    if (port === undefined) throw new Error(`test network: no route to ${target.address}`);
    // The system's own TLS connect, to the local server standing in for that public address.
    return this.system.connect({ ...target, address: '127.0.0.1', port });
  }
}

/** Storage room for downloads outside a scrape, recording what was taken and given back. */
function budget(): StorageBudget & { reserved: number[]; released: string[] } {
  let n = 0;
  const reserved: number[] = [];
  const released: string[] = [];
  return {
    reserved,
    released,
    reserve: async (bytes) => {
      reserved.push(bytes);
      return { ok: true, reservation: `r${(n += 1)}` };
    },
    release: async (id) => void released.push(id),
  };
}

describe('downloads from a non-sandbox media host, through the real path', () => {
  const seen: { host: string | undefined; path: string | undefined }[] = [];
  const wrongSeen: typeof seen = [];
  let cdn: https.Server;
  let wrong: https.Server;
  let network: TestNetwork;
  let h: ArchiveHarness;
  const policy = { hosts: DISCORD_MEDIA_HOSTS, trustedOrigins: [], maxBytes: 1024 * 1024 };

  beforeAll(async () => {
    cdn = await tlsServer('cdn', seen);
    wrong = await tlsServer('other', wrongSeen);
    network = new TestNetwork(
      new Map([
        [CDN_ADDRESS, portOf(cdn)],
        [WRONG_CERT_ADDRESS, portOf(wrong)],
      ]),
    );
    h = await archiveHarness({ limits: { limitBytes: 10 * 1024 * 1024, warnPercent: 80, overrunPercent: 100 }, policy, network });
    h.start();
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await new Promise((resolve) => cdn?.close(resolve));
    await new Promise((resolve) => wrong?.close(resolve));
  });

  it('a download scrape stores a file of cdn.discordapp.com, connected to the checked public address, and refuses a host answering a private one', async () => {
    network.answers.set('cdn.discordapp.com', [[{ address: CDN_ADDRESS, family: 4 }]]);
    network.answers.set('media.discordapp.net', [[{ address: '10.20.30.40', family: 4 }, { address: '::ffff:127.0.0.1', family: 6 }]]);
    const channel = '345678901234567100';
    const photo = 'https://cdn.discordapp.com/attachments/345678901234567100/1/photo.png?ex=6790&hm=ab';
    const inside = 'https://media.discordapp.net/attachments/345678901234567100/2/inside.png';
    h.memory.archived.set(channel, [messageWith(channel, 1, photo), messageWith(channel, 2, inside)]);
    const id = await h.download(channel);
    const done = await h.settled(id);
    expect(done.state).toBe('completed');

    const items = (await h.media.queryMedia({ scrapeId: id }, admin)).items;
    const stored = items.find((i) => i.url === photo);
    const refused = items.find((i) => i.url === inside);
    expect(stored).toMatchObject({ state: 'stored', sizeBytes: PNG.length, sha256: createHash('sha256').update(PNG).digest('hex') });
    expect(await readFile(stored?.localPath ?? '')).toEqual(PNG);
    expect(refused).toMatchObject({ state: 'refused', error: 'media.discordapp.net resolves to a private address', localPath: null });

    // One lookup per host; one connection, to the answer the policy checked, TLS verified for the host's name.
    expect([...network.resolved].sort()).toEqual(['cdn.discordapp.com', 'media.discordapp.net']);
    expect(network.connected).toEqual([{ address: CDN_ADDRESS, family: 4, port: 443, servername: 'cdn.discordapp.com' }]);
    expect(seen).toEqual([{ host: 'cdn.discordapp.com', path: '/attachments/345678901234567100/1/photo.png?ex=6790&hm=ab' }]);
    // Counted: storage and the scrape agree on the one file.
    const storage = await h.media.storageStatus();
    expect(storage.usedBytes).toBe(PNG.length);
    expect(done).toMatchObject({ bytes: PNG.length, itemsFound: 2, errors: 1 });
  });

  describe('the downloader alone', () => {
    const downloader = (): MediaDownloader => new MediaDownloader(h.db.dataDir, { ...policy, timeoutMs: 5_000 }, network);
    const url = 'https://cdn.discordapp.com/attachments/1/2/again.png';

    it('resolves once and connects to that answer, whatever DNS says next (no rebinding between check and connect)', async () => {
      network.resolved.length = 0;
      network.connected.length = 0;
      network.answers.set('cdn.discordapp.com', [[{ address: CDN_ADDRESS, family: 4 }], [{ address: '127.0.0.1', family: 4 }]]);
      const room = budget();
      const got = await downloader().download(url, AbortSignal.timeout(10_000), room);
      expect(got).toMatchObject({ ok: true, size: PNG.length, reservation: 'r1' });
      expect(room.reserved).toEqual([PNG.length]);
      expect(network.resolved).toEqual(['cdn.discordapp.com']);
      expect(network.connected.map((t) => t.address)).toEqual([CDN_ADDRESS]);
      // The next lookup answers loopback: refused before any connection.
      const next = await downloader().download(url, AbortSignal.timeout(10_000), budget());
      expect(next).toEqual({ ok: false, refused: true, reason: 'cdn.discordapp.com resolves to a private address' });
      expect(network.connected.map((t) => t.address)).toEqual([CDN_ADDRESS]);
    });

    it('of several answers, connects only to a public one', async () => {
      network.connected.length = 0;
      network.answers.set('cdn.discordapp.com', [[{ address: '10.0.0.1', family: 4 }, { address: 'fd00::1', family: 6 }, { address: CDN_ADDRESS, family: 4 }]]);
      expect(await downloader().download(url, AbortSignal.timeout(10_000), budget())).toMatchObject({ ok: true });
      expect(network.connected.map((t) => t.address)).toEqual([CDN_ADDRESS]);
    });

    it.each([
      ['loopback', [{ address: '127.0.0.1', family: 4 }]],
      ['metadata', [{ address: '169.254.169.254', family: 4 }]],
      ['IPv6 loopback and unique local', [{ address: '::1', family: 6 }, { address: 'fd00::1', family: 6 }]],
      ['NAT64 and 6to4 of private IPv4', [{ address: '64:ff9b::a9fe:a9fe', family: 6 }, { address: '2002:a00:1::1', family: 6 }]],
      ['nothing', []],
    ] as const)('refuses a host that resolves to %s, before connecting', async (_what, answer) => {
      network.connected.length = 0;
      network.answers.set('cdn.discordapp.com', [[...answer]]);
      const room = budget();
      expect(await downloader().download(url, AbortSignal.timeout(10_000), room)).toEqual({ ok: false, refused: true, reason: 'cdn.discordapp.com resolves to a private address' });
      expect(network.connected).toEqual([]);
      expect(room.reserved).toEqual([]);
    });

    it('refuses a server whose certificate is not valid for the host, writing nothing', async () => {
      network.answers.set('cdn.discordapp.com', [[{ address: WRONG_CERT_ADDRESS, family: 4 }]]);
      const room = budget();
      const before = await readdir(path.join(h.db.dataDir, 'tmp'));
      const got = await downloader().download(url, AbortSignal.timeout(10_000), room);
      expect(got).toMatchObject({ ok: false, refused: false });
      expect((got as { reason: string }).reason).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
      expect(wrongSeen).toEqual([]);
      expect(room.reserved).toEqual([]);
      expect(await readdir(path.join(h.db.dataDir, 'tmp'))).toEqual(before);
    });
  });
});
