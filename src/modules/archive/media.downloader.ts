import { createHash, randomUUID } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import http, { type IncomingMessage } from 'node:http';
import net, { isIP } from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tls from 'node:tls';
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

/** One answer of the resolver. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** The address a connection is opened to: one the policy checked, never a name resolved again. */
export interface ConnectTarget extends ResolvedAddress {
  port: number;
  /** For https: the host name the server's certificate must be valid for (and SNI). */
  servername: string | undefined;
}

/**
 * How the downloader reaches the network: resolve a host name to every address, then connect to
 * one checked address. The system's by default; a test injects its own resolver and routes the
 * checked address to a local server.
 */
export interface DownloadNetwork {
  resolve(hostname: string): Promise<ResolvedAddress[]>;
  connect(target: ConnectTarget): Duplex;
}

/** The system's resolver and sockets; `tlsOptions` adds trust (a test's certificate authority). */
export function systemNetwork(tlsOptions: Pick<tls.ConnectionOptions, 'ca'> = {}): DownloadNetwork {
  return {
    resolve: async (hostname) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 })),
    // An address as the host: no lookup happens here, so DNS cannot rebind between check and connect.
    connect: (t) => (t.servername !== undefined ? tls.connect({ ...tlsOptions, host: t.address, port: t.port, servername: t.servername }) : net.connect({ host: t.address, port: t.port })),
  };
}

/** Room for one file in storage, taken before it is written (see MediaService.storageBudget). */
export interface StorageBudget {
  /** Reserve up to `bytes`; `full`: storage is at its limit; `busy`: only other downloads in flight fill it. */
  reserve(bytes: number): Promise<{ ok: true; reservation: string } | { ok: false; noRoom: 'full' | 'busy' }>;
  release(reservation: string): Promise<void>;
}

export type DownloadOutcome =
  /** Stored under `path` (relative to the media folder); `reservation` is the caller's to commit or release. */
  | { ok: true; sha256: string; size: number; contentType: string; path: string; reservation: string }
  /** `refused`: Herald would not fetch it (host, address, redirect, type, size); otherwise it could not be fetched. */
  | { ok: false; refused: boolean; reason: string }
  /** No room for it in storage: nothing was written. */
  | { ok: false; noRoom: 'full' | 'busy' };

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
 * address (every DNS answer checked, the connection opened to the checked address itself, so DNS
 * cannot rebind around it), only media content types, each file's room in storage reserved before
 * it is written, streamed to disk through the digest with a size cap.
 */
export class MediaDownloader {
  constructor(
    private readonly mediaDir: string,
    private readonly policy: DownloadPolicy,
    private readonly network: DownloadNetwork = systemNetwork(),
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

  async download(raw: string, signal: AbortSignal, budget: StorageBudget): Promise<DownloadOutcome> {
    const refusal = this.check(raw);
    if (refusal !== undefined) return { ok: false, refused: true, reason: refusal };
    const url = new URL(raw);
    const trusted = this.policy.trustedOrigins.includes(url.origin);
    const tmpDir = path.join(this.mediaDir, 'tmp');
    await mkdir(tmpDir, { recursive: true });
    const tmp = path.join(tmpDir, randomUUID());
    let reservation: string | undefined;
    try {
      const response = await this.get(url, trusted, AbortSignal.any([signal, AbortSignal.timeout(this.policy.timeoutMs)]));
      // Counted against the storage limit before a byte is written: the declared size, or the cap.
      const length = Number(response.headers['content-length'] ?? NaN);
      const declared = Number.isFinite(length) ? length : undefined;
      const room = await budget.reserve(declared ?? this.policy.maxBytes);
      if (!room.ok) {
        response.destroy();
        return { ok: false, noRoom: room.noRoom };
      }
      reservation = room.reservation;
      const { sha256, size, contentType } = await this.save(response, tmp, declared ?? this.policy.maxBytes);
      // Fewer bytes than declared is a cut answer, whatever the stream said: never stored as the file.
      if (declared !== undefined && size !== declared) throw new Error(`the answer ended after ${size} of ${declared} bytes`);
      const relative = blobRelativePath(sha256);
      const final = path.join(this.mediaDir, relative);
      await mkdir(path.dirname(final), { recursive: true });
      // A file seen before is already there: keep the one copy.
      const exists = await stat(final).then(() => true, () => false);
      if (exists) await rm(tmp, { force: true });
      else await rename(tmp, final);
      return { ok: true, sha256, size, contentType, path: relative, reservation };
    } catch (err) {
      await rm(tmp, { force: true });
      // Unused room goes back; if that fails, it ends with the step's lease anyway.
      if (reservation !== undefined) await budget.release(reservation).catch(() => undefined);
      if (err instanceof Refused) return { ok: false, refused: true, reason: err.message };
      return { ok: false, refused: false, reason: err instanceof Error ? `${err.name}: ${(err as NodeJS.ErrnoException).code ?? err.message}`.slice(0, 200) : 'download failed' };
    }
  }

  /** Resolve, check every answer, and connect to a checked address (the sandbox origin may be private). */
  private async target(url: URL, trusted: boolean, signal: AbortSignal): Promise<ConnectTarget> {
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    const servername = url.protocol === 'https:' ? hostname : undefined;
    const literal = isIP(hostname);
    const answers = literal !== 0 ? [{ address: hostname, family: literal as 4 | 6 }] : await abortable(this.network.resolve(hostname), signal);
    const usable = trusted ? answers : answers.filter((a) => isPublicAddress(a.address));
    const first = usable[0];
    if (first === undefined) throw new Refused(`${hostname} resolves to a private address`);
    return { address: first.address, family: first.family, port, servername };
  }

  private async get(url: URL, trusted: boolean, signal: AbortSignal): Promise<IncomingMessage> {
    const target = await this.target(url, trusted, signal);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          method: 'GET',
          host: target.address,
          port: target.port,
          path: `${url.pathname}${url.search}`,
          headers: { host: url.host, 'user-agent': 'Herald media archive' },
          signal,
          // The socket is opened to the checked address; no agent, so no lookup of its own.
          createConnection: () => this.network.connect(target),
        },
        (res) => {
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
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * Stream to `tmp` through the digest, stopping past `limit` (the room reserved for it). Read as a
   * stream's own iteration, so a connection that closed while room was being reserved is an error
   * here, not an 'aborted' event nobody was listening for yet.
   */
  private async save(res: IncomingMessage, tmp: string, limit: number): Promise<{ sha256: string; size: number; contentType: string }> {
    const contentType = (res.headers['content-type'] ?? 'application/octet-stream').split(';')[0]?.trim() ?? 'application/octet-stream';
    const hash = createHash('sha256');
    const maxBytes = this.policy.maxBytes;
    let size = 0;
    await pipeline(
      res,
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          size += chunk.length;
          if (size > limit) throw new Refused(`file larger than ${maxBytes} bytes`);
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(tmp, { mode: 0o600 }),
    );
    // An answer destroyed after it had all arrived (the request aborted while room was reserved)
    // iterates as an empty stream, with no error: only its end having been read says it was whole.
    if (!res.readableEnded) throw new Error('the answer was cut off before its end was read');
    return { sha256: hash.digest('hex'), size, contentType };
  }
}

/** `promise`, or the signal's reason once it aborts (a DNS lookup cannot be cancelled). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
