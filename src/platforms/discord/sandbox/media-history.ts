import { deflateSync } from 'node:zlib';
import Router from '@koa/router';
import { DISCORD_EPOCH } from '../snowflake.js';
import { SANDBOX_MEMBER_IDS } from './guild-members.js';
import { SANDBOX_IDS } from './ids.js';

/**
 * A channel with a long generated history of messages carrying media (attachments, embeds, media
 * links), and the files they point at, served by the sandbox like Discord's CDN: the media archive
 * runs offline against it. Nothing is stored: message `i` and every file are computed when asked
 * for, so the sandbox starts as fast with 20,000 messages as with none.
 *
 * Shortcut: its files are served from the sandbox's own address (loopback in tests), which the
 * downloader refuses unless Herald is started with that origin trusted (`mediaOrigins`, given by
 * sandbox mode and the test Herald). A trusted origin skips the check real CDN downloads go through
 * (a Discord media host, resolved once to a public address, connected to that address, certificate
 * checked). That real path is tested without this shortcut in test/archive-download.test.ts and
 * test/public-address.test.ts.
 */

/** The media channel of the sandbox guild. */
export const SANDBOX_MEDIA_CHANNEL = '345678901234567895';
/** Messages in it unless the sandbox is told otherwise. */
export const SANDBOX_MEDIA_MESSAGES = 20_000;
/** The oldest message's time; one message a minute after it. */
const BASE_MS = BigInt(Date.UTC(2025, 0, 1));
const STEP_MS = 60_000n;
/** Distinct picture contents: img-k and img-(k+PALETTE) are the same bytes (dedup by content). */
const PALETTE = 300;
/** Size of the file served at /media/huge.bin (over a small HERALD_MEDIA_MAX_FILE_BYTES). */
export const HUGE_FILE_BYTES = 2 * 1024 * 1024;

const AUTHORS = [
  { id: SANDBOX_IDS.user, username: 'roshne', global_name: 'Roshne' },
  { id: SANDBOX_MEMBER_IDS.manager, username: 'morgan', global_name: 'Morgan' },
  { id: SANDBOX_MEMBER_IDS.owner, username: 'ada', global_name: 'Ada' },
];
const TOPICS = ['harbour', 'mountain', 'festival', 'workshop', 'garden'];

export class MediaHistory {
  constructor(
    readonly count: number,
    /** The sandbox's origin (its CDN). */
    private readonly origin: () => string,
  ) {}

  has(channelId: string): boolean {
    return channelId === SANDBOX_MEDIA_CHANNEL;
  }

  channel(): Record<string, unknown> {
    return { id: SANDBOX_MEDIA_CHANNEL, type: 0, name: 'media', guild_id: SANDBOX_IDS.guild, position: 0, permission_overwrites: [] };
  }

  idOf(i: number): bigint {
    return (BASE_MS + BigInt(i) * STEP_MS - DISCORD_EPOCH) << 22n;
  }

  /** Newest first, like Discord: before an id, after an id (the oldest page after it), or the newest. */
  page(before: bigint | undefined, after: bigint | undefined, limit: number): Record<string, unknown>[] {
    const indexBelow = (id: bigint): number => {
      // The newest message whose id is below `id`.
      let i = Number((((id - 1n) >> 22n) + DISCORD_EPOCH - BASE_MS) / STEP_MS);
      i = Math.min(i, this.count - 1);
      while (i >= 0 && this.idOf(i) >= id) i -= 1;
      return i;
    };
    const hi = before === undefined ? this.count - 1 : indexBelow(before);
    const lo = after === undefined ? 0 : indexBelow(after + 1n) + 1;
    const out: Record<string, unknown>[] = [];
    if (after !== undefined) {
      for (let i = lo; i <= hi && out.length < limit; i++) out.unshift(this.message(i));
      return out;
    }
    for (let i = hi; i >= lo && out.length < limit; i--) out.push(this.message(i));
    return out;
  }

  /** Message `i` (0 is the oldest), as Discord lists it. */
  message(i: number): Record<string, unknown> {
    const base = this.origin();
    const id = String(this.idOf(i));
    const author = AUTHORS[i % AUTHORS.length] as (typeof AUTHORS)[number];
    const topic = TOPICS[i % TOPICS.length] as string;
    const attachments: Record<string, unknown>[] = [];
    const embeds: Record<string, unknown>[] = [];
    let content = `Notes ${i} from the ${topic}`;
    const attach = (name: string, contentType: string): void => {
      const size = fileBytes(name)?.length ?? 0;
      attachments.push({ id: `${id}${attachments.length}`, filename: name, size, url: `${base}/media/${name}`, proxy_url: `${base}/media/${name}`, content_type: contentType });
    };
    if (i % 3 === 0) attach(`img-${i % 600}.png`, 'image/png');
    if (i % 11 === 0) attach(`doc-${i % 50}.pdf`, 'application/pdf');
    if (i % 5 === 0) embeds.push({ type: 'rich', title: `Album ${i}`, image: { url: `${base}/media/embed-${i % PALETTE}.png` }, thumbnail: { url: `${base}/media/thumb-${i % PALETTE}.png` } });
    if (i % 7 === 0) content += ` clip: ${base}/media/clip-${i % 100}.mp4`;
    // The newest three messages carry what a download must refuse: too big, a redirect, a foreign host.
    if (i === this.count - 1) attach('huge.bin', 'application/octet-stream');
    if (i === this.count - 2) content += ` moved: ${base}/media-redirect/img-1.png`;
    if (i === this.count - 3) content += ' elsewhere: https://images.example.com/picture.png';
    return {
      id,
      channel_id: SANDBOX_MEDIA_CHANNEL,
      author: { id: author.id, username: author.username, global_name: author.global_name, discriminator: '0', avatar: null },
      content,
      embeds,
      components: [],
      attachments,
      timestamp: new Date(Number(BASE_MS + BigInt(i) * STEP_MS)).toISOString(),
      edited_timestamp: null,
      type: 0,
      tts: false,
      mention_everyone: false,
      mentions: [],
      mention_roles: [],
      pinned: false,
    };
  }
}

/** The bytes and type of a served file, computed from its name. */
export function fileBytes(name: string): Buffer | undefined {
  return served(name)?.body;
}

function served(name: string): { body: Buffer; type: string } | undefined {
  let m = /^(img|embed|thumb)-([0-9]{1,4})\.png$/.exec(name);
  if (m !== null) return { body: png(Number(m[2]) % PALETTE), type: 'image/png' };
  m = /^clip-([0-9]{1,3})\.mp4$/.exec(name);
  if (m !== null) return { body: Buffer.concat([Buffer.from(`\0\0\0\x18ftypmp42 herald clip ${m[1]}`), Buffer.alloc(4096, Number(m[1]))]), type: 'video/mp4' };
  m = /^doc-([0-9]{1,3})\.pdf$/.exec(name);
  if (m !== null) return { body: Buffer.from(`%PDF-1.4\n% herald sandbox document ${m[1]}\n%%EOF\n`), type: 'application/pdf' };
  if (name === 'huge.bin') return { body: Buffer.alloc(HUGE_FILE_BYTES, 7), type: 'application/octet-stream' };
  return undefined;
}

/** The sandbox's CDN: /media/<name> (each request's name appended to `requested`), and /media-redirect/<name> answering 302 elsewhere. */
export function mediaRoutes(requested: string[]): Router {
  const router = new Router();
  router.get('/media/:name', (ctx) => {
    requested.push(ctx.params['name'] ?? '');
    const file = served(ctx.params['name'] ?? '');
    if (file === undefined) {
      ctx.status = 404;
      ctx.body = { message: '404: Not Found', code: 0 };
      return;
    }
    ctx.set({ 'content-type': file.type, 'cache-control': 'public, max-age=86400' });
    ctx.body = file.body;
  });
  router.get('/media-redirect/:name', (ctx) => {
    ctx.status = 302;
    ctx.set('location', `http://169.254.169.254/latest/${ctx.params['name'] ?? ''}`);
  });
  return router;
}

/** A 16×16 PNG of one colour of the palette. */
function png(colour: number): Buffer {
  const hue = (colour * 137) % 360;
  const [r, g, b] = hsl(hue, 0.6, 0.55);
  const row = Buffer.alloc(1 + 16 * 3);
  for (let x = 0; x < 16; x++) row.set([r, g, b], 1 + x * 3);
  const raw = Buffer.concat(Array.from({ length: 16 }, () => row));
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(16, 0);
  ihdr.writeUInt32BE(16, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const byte of buf) c = (CRC_TABLE[(c ^ byte) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function hsl(h: number, s: number, l: number): [number, number, number] {
  const a = s * Math.min(l, 1 - l);
  const f = (n: number): number => {
    const k = (n + h / 30) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}
