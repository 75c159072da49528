import { createHash, randomUUID } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import path from 'node:path';
import { blobRelativePath } from './media.js';
import { isPublicAddress } from './public-address.js';

/** Where downloads may come from, and how much of them. */
export interface DownloadPolicy {
  /** Host names of the platform's media servers (Discord's CDN), fetched over https only. */
  hosts: readonly string[];
  /**
   * Exact origins allowed over http and on private addresses: the sandbox's, in sandbox mode
   * only. Everything else must resolve to a public address.
   */
  trustedOrigins: readonly string[];
  /** Largest file stored; a larger one is refused (by its Content-Length, or when the stream passes it). */
  maxBytes: number;
  timeoutMs: number;
}

export type DownloadOutcome =
  | { ok: true; sha256: string; size: number; contentType: string }
  /** `refused`: Herald would not fetch it (host, redirect, type, size); otherwise it could not be fetched. */
  | { ok: false; refused: boolean; reason: string };

/** Discord's media hosts. */
export const DISCORD_MEDIA_HOSTS = ['cdn.discordapp.com', 'media.discordapp.net'] as const;

/** Content types kept: media, and the generic binary type CDNs use for files. */
function acceptableType(contentType: string): boolean {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return /^(image|video|audio)\/[a-z0-9.+-]+$/.test(type) || type === 'application/octet-stream' || type === 'application/pdf';
}

class Refused extends Error {}

/**
 * Fetches media files into the media folder, content-addressed by SHA-256: only from the
 * platform's media hosts (or the sandbox's origin), never following a redirect, never to a private
 * address (checked on the address actually connected to, so DNS cannot rebind around it), only
 * media content types, streamed to disk through the digest with a size cap.
 */
export class MediaDownloader {
  constructor(
    private readonly mediaDir: string,
    private readonly policy: DownloadPolicy,
  ) {}

  /** Why a URL is refused before any request, or undefined when it may be fetched. */
  check(raw: string): string | undefined {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return 'not a URL';
    }
    if (this.policy.trustedOrigins.includes(url.origin)) return undefined;
    if (url.protocol !== 'https:') return 'only https downloads';
    if (url.username !== '' || url.password !== '') return 'credentials in the URL';
    if (!this.policy.hosts.includes(url.hostname.toLowerCase())) return `host ${url.hostname} is not a media host of the platform`;
    if (isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0) return 'an address, not a media host';
    return undefined;
  }

  async download(raw: string, signal: AbortSignal): Promise<DownloadOutcome> {
    const refusal = this.check(raw);
    if (refusal !== undefined) return { ok: false, refused: true, reason: refusal };
    const url = new URL(raw);
    const trusted = this.policy.trustedOrigins.includes(url.origin);
    const tmpDir = path.join(this.mediaDir, 'tmp');
    await mkdir(tmpDir, { recursive: true });
    const tmp = path.join(tmpDir, randomUUID());
    try {
      const response = await this.get(url, trusted, signal);
      const { sha256, size, contentType } = await this.save(response, tmp);
      const final = path.join(this.mediaDir, blobRelativePath(sha256));
      await mkdir(path.dirname(final), { recursive: true });
      // A file seen before is already there: keep the one copy.
      const exists = await stat(final).then(() => true, () => false);
      if (exists) await rm(tmp, { force: true });
      else await rename(tmp, final);
      return { ok: true, sha256, size, contentType };
    } catch (err) {
      await rm(tmp, { force: true });
      if (err instanceof Refused) return { ok: false, refused: true, reason: err.message };
      return { ok: false, refused: false, reason: err instanceof Error ? `${err.name}: ${(err as NodeJS.ErrnoException).code ?? err.message}`.slice(0, 200) : 'download failed' };
    }
  }

  private get(url: URL, trusted: boolean, signal: AbortSignal): Promise<IncomingMessage> {
    // Resolve, then refuse a private address unless this is the trusted (sandbox) origin.
    const lookup: LookupFunction = (hostname, options, callback) => {
      dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
        if (err !== null) return callback(err, '', 4);
        const usable = addresses.filter((a) => trusted || isPublicAddress(a.address));
        if (usable.length === 0) return callback(new Refused(`${hostname} resolves to a private address`), '', 4);
        if ((options as { all?: boolean }).all === true) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, usable);
        const first = usable[0] as LookupAddress;
        return callback(null, first.address, first.family);
      });
    };
    const client = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = client.get(url, { lookup, signal: AbortSignal.any([signal, AbortSignal.timeout(this.policy.timeoutMs)]), headers: { 'user-agent': 'Herald media archive' } }, (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400) {
          res.resume();
          return reject(new Refused(`redirect (${status}) refused`));
        }
        if (status !== 200) {
          res.resume();
          return reject(new Error(`HTTP ${status}`));
        }
        const type = res.headers['content-type'] ?? '';
        if (!acceptableType(type)) {
          res.resume();
          return reject(new Refused(`content type ${type || '(none)'} is not media`));
        }
        const length = Number(res.headers['content-length'] ?? NaN);
        if (Number.isFinite(length) && length > this.policy.maxBytes) {
          res.destroy();
          return reject(new Refused(`file larger than ${this.policy.maxBytes} bytes`));
        }
        resolve(res);
      });
      req.on('error', reject);
    });
  }

  /** Stream to `tmp` through the digest, stopping at the size cap. */
  private save(res: IncomingMessage, tmp: string): Promise<{ sha256: string; size: number; contentType: string }> {
    const contentType = (res.headers['content-type'] ?? 'application/octet-stream').split(';')[0]?.trim() ?? 'application/octet-stream';
    const hash = createHash('sha256');
    const out = createWriteStream(tmp, { mode: 0o600 });
    let size = 0;
    return new Promise((resolve, reject) => {
      let failed = false;
      const fail = (err: Error): void => {
        if (failed) return;
        failed = true;
        res.destroy();
        out.destroy();
        reject(err);
      };
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.policy.maxBytes) return fail(new Refused(`file larger than ${this.policy.maxBytes} bytes`));
        hash.update(chunk);
        if (!out.write(chunk)) {
          res.pause();
          out.once('drain', () => res.resume());
        }
      });
      res.on('error', fail);
      res.on('aborted', () => fail(new Error('connection closed mid-file')));
      out.on('error', fail);
      res.on('end', () => {
        if (failed) return;
        out.end(() => resolve({ sha256: hash.digest('hex'), size, contentType }));
      });
    });
  }
}
