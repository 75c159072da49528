import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import busboy from 'busboy';
import type { Context } from 'koa';
import { readJsonBody } from '../../../infra/http/body.js';

/**
 * Files on messages, as Discord takes and serves them: a create with files is multipart/form-data
 * with the JSON in `payload_json` and each file as `files[n]`
 * (https://discord.com/developers/docs/reference#uploading-files); a stored attachment has Discord's
 * shape and is served from a CDN-like URL of the sandbox.
 */

/** An attachment as Discord shows it on a message. */
export interface SandboxAttachment {
  id: string;
  filename: string;
  description?: string;
  content_type: string;
  size: number;
  url: string;
  proxy_url: string;
}

/** Discord's limits: 10 MiB a file (unboosted, since January 2025), 10 files, 25 MiB a request. */
export interface UploadLimits {
  maxFileBytes: number;
  maxFiles: number;
  maxRequestBytes: number;
}
export const DISCORD_UPLOAD_LIMITS: UploadLimits = { maxFileBytes: 10 * 1024 * 1024, maxFiles: 10, maxRequestBytes: 25 * 1024 * 1024 };

/** A file of a create, before it is stored. */
export interface UploadedFile {
  /** The n of `files[n]`: the body's `attachments[].id` names it. */
  index: number;
  filename: string;
  contentType: string;
  data: Buffer;
}

export type ParsedCreate =
  | { ok: true; body: Record<string, unknown>; files: UploadedFile[] }
  /** Discord's answer: 413 code 40005 for a file or request over the limit, 400 50035/50109 for a malformed one. */
  | { ok: false; status: number; code: number; message: string };

const TOO_LARGE = { ok: false as const, status: 413, code: 40005, message: 'Request entity too large' };

/** A create's body: JSON as before, or multipart with `payload_json` and `files[n]`, limits enforced as it streams. */
export async function readCreateBody(ctx: Context, limits: UploadLimits): Promise<ParsedCreate> {
  if (!/^multipart\/form-data\b/i.test(ctx.get('content-type'))) {
    const parsed = await readJsonBody(ctx.req);
    if (!parsed.ok) return { ok: false, status: 400, code: 50109, message: 'The request body contains invalid JSON.' };
    return { ok: true, body: parsed.value as Record<string, unknown>, files: [] };
  }
  const declared = Number(ctx.get('content-length'));
  // The whole request, files and JSON: a little room over the files' own limit for the form's framing.
  if (Number.isFinite(declared) && declared > limits.maxRequestBytes + 1024 * 1024) {
    ctx.set('Connection', 'close');
    return TOO_LARGE;
  }
  return new Promise<ParsedCreate>((resolve) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: ctx.req.headers, limits: { fileSize: limits.maxFileBytes, files: limits.maxFiles, fieldSize: 1024 * 1024 } });
    } catch {
      resolve({ ok: false, status: 400, code: 50035, message: 'Invalid Form Body' });
      return;
    }
    let payload: string | undefined;
    const files: UploadedFile[] = [];
    let total = 0;
    let failure: ParsedCreate | undefined;
    parser.on('field', (name, value) => {
      if (name === 'payload_json') payload = value;
    });
    parser.on('file', (name, stream, info) => {
      const m = /^files\[(\d+)\]$/.exec(name) ?? /^file(\d*)$/.exec(name);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > limits.maxRequestBytes) failure ??= TOO_LARGE;
        else chunks.push(chunk);
      });
      stream.on('limit', () => (failure ??= TOO_LARGE));
      stream.on('end', () => {
        if (failure === undefined) files.push({ index: Number(m?.[1] || files.length), filename: info.filename ?? 'file', contentType: info.mimeType || 'application/octet-stream', data: Buffer.concat(chunks) });
      });
    });
    parser.on('filesLimit', () => (failure ??= { ok: false, status: 400, code: 50035, message: 'Invalid Form Body: files: Must be 10 or fewer in length.' }));
    parser.on('error', () => resolve({ ok: false, status: 400, code: 50035, message: 'Invalid Form Body' }));
    parser.on('close', () => {
      if (failure !== undefined) {
        if (failure.ok === false && failure.status === 413) ctx.set('Connection', 'close');
        return resolve(failure);
      }
      let body: unknown = {};
      try {
        body = payload === undefined ? {} : JSON.parse(payload);
      } catch {
        return resolve({ ok: false, status: 400, code: 50109, message: 'The request body contains invalid JSON.' });
      }
      resolve({ ok: true, body: body as Record<string, unknown>, files });
    });
    ctx.req.pipe(parser);
  });
}

/**
 * The bytes of every attachment, by id: in memory, and beside the sandbox's state file when it
 * has one (so a restarted `npm start` still shows its pictures).
 */
export class AttachmentStore {
  private readonly bytes = new Map<string, Buffer>();
  constructor(private readonly dir: string | undefined) {}

  put(id: string, data: Buffer): void {
    this.bytes.set(id, data);
    if (this.dir === undefined) return;
    mkdirSync(this.dir, { recursive: true });
    writeFileSync(path.join(this.dir, id), data, { mode: 0o600 });
  }

  get(id: string): Buffer | undefined {
    const held = this.bytes.get(id);
    if (held !== undefined || this.dir === undefined || !/^[0-9]+$/.test(id)) return held;
    try {
      return readFileSync(path.join(this.dir, id));
    } catch {
      return undefined;
    }
  }
}

/**
 * Store a create's files as attachments of message `channelId`, described by the body's
 * `attachments` (by the index of `files[n]`), served at `${base}/attachments/{channel}/{id}/{filename}`
 * like cdn.discordapp.com.
 */
export function attach(files: readonly UploadedFile[], body: Record<string, unknown>, channelId: string, base: string, nextId: () => string, store: AttachmentStore): SandboxAttachment[] {
  const described = Array.isArray(body['attachments']) ? (body['attachments'] as { id?: unknown; filename?: unknown; description?: unknown }[]) : [];
  return [...files]
    .sort((a, b) => a.index - b.index)
    .map((f) => {
      const d = described.find((x) => String(x.id) === String(f.index));
      const id = nextId();
      const filename = typeof d?.filename === 'string' && d.filename !== '' ? d.filename : f.filename;
      store.put(id, f.data);
      const url = `${base}/attachments/${channelId}/${id}/${encodeURIComponent(filename)}`;
      return {
        id,
        filename,
        ...(typeof d?.description === 'string' ? { description: d.description } : {}),
        content_type: f.contentType,
        size: f.data.length,
        url,
        proxy_url: url.replace('/attachments/', '/media-proxy/attachments/'),
      };
    });
}

/** The sandbox's CDN: attachments by channel, id and name (and the proxy form of the same URL). */
export function attachmentRoutes(store: AttachmentStore, find: (channelId: string, id: string) => SandboxAttachment | undefined, requested: string[]): Router {
  const router = new Router();
  const serve = (ctx: Context): void => {
    const channelId = String(ctx.params['channel'] ?? '');
    const id = String(ctx.params['id'] ?? '');
    requested.push(id);
    const attachment = find(channelId, id);
    const data = attachment === undefined ? undefined : store.get(id);
    if (attachment === undefined || data === undefined || attachment.filename !== ctx.params['filename']) {
      ctx.status = 404;
      ctx.body = { message: '404: Not Found', code: 0 };
      return;
    }
    ctx.set({ 'content-type': attachment.content_type, 'cache-control': 'public, max-age=86400', 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'; sandbox" });
    ctx.body = data;
  };
  router.get('/attachments/:channel/:id/:filename', serve);
  router.get('/media-proxy/attachments/:channel/:id/:filename', serve);
  return router;
}
