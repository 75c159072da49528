import { createReadStream } from 'node:fs';
import { PassThrough } from 'node:stream';
import Router from '@koa/router';
import busboy from 'busboy';
import type { Context as KoaContext } from 'koa';
import type { OperationHandlers } from '../../infra/http/api.js';
import { reply } from '../../infra/http/reply.js';
import { DomainError, errorSummary, InvalidRequestError } from '../../infra/errors.js';
import type { Logger } from 'pino';
import { uploadCapsOf } from '../../infra/http/policy.middleware.js';
import { FilesQuotaError, FileTooLargeError, type FileStore, type StoredFile } from './files.service.js';
import type { AttachmentReader } from './attachments.js';

/** The contract's reasons (openapi/files.yaml). */
const FILENAME_REQUIRED = 'filename is required: the filename query parameter or the X-Herald-Filename header';
const FILENAME_INVALID = 'filename must be 1..255 characters, without / \\ or control characters';
const ONE_FILE_PART = 'multipart body must hold exactly one file part';
// eslint-disable-next-line no-control-regex
const FILENAME = /^[^/\\\x00-\x1f\x7f]{1,255}$/u;

function checkFilename(name: string | undefined): string {
  if (name === undefined || name === '') throw new InvalidRequestError(FILENAME_REQUIRED);
  if (!FILENAME.test(name) || [...name].length > 255) throw new InvalidRequestError(FILENAME_INVALID);
  return name;
}

/** The name from the header, percent-decoded where it was encoded. */
function headerFilename(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * POST /mcp/files and GET /mcp/files/{file}: outside the JSON API (raw and multipart bodies,
 * bytes out), documented in openapi/files.yaml. The API middleware has authenticated them.
 */
export function fileRoutes(files: FileStore, log: Logger): Router {
  const router = new Router();
  router.post('/mcp/files', async (ctx) => {
    try {
      const stored = await upload(ctx, files);
      ctx.status = stored.existing ? 200 : 201;
      ctx.body = stored;
    } catch (err) {
      // A refused upload's remaining bytes are not waited for: the connection closes after the answer.
      if (!ctx.req.readableEnded) ctx.set('Connection', 'close');
      if (err instanceof FileTooLargeError) {
        ctx.status = 413;
        ctx.body = { error: err.reason };
      } else if (err instanceof FilesQuotaError) {
        ctx.status = 403;
        ctx.body = { error: err.reason };
      } else if (err instanceof DomainError) {
        ctx.status = 400;
        ctx.body = { error: err.reason };
      } else if (ctx.req.socket.destroyed || (err as NodeJS.ErrnoException).code === 'ECONNRESET') {
        // The client went away: nobody to answer. (The request stream itself counts as destroyed
        // once its body has been read, so it cannot say this: an answer is owed then.)
        ctx.respond = false;
      } else {
        log.error({ err: errorSummary(err) }, 'upload failed');
        ctx.status = 500;
        ctx.body = { error: 'internal error' };
      }
    }
  });
  router.get('/mcp/files/:file', async (ctx) => {
    const sha = ctx.params['file'] ?? '';
    const row = await files.find(sha);
    if (row === undefined) {
      ctx.status = 404;
      ctx.body = { error: 'file not found' };
      return;
    }
    ctx.set({
      'content-type': row.content_type,
      'content-length': String(row.size_bytes),
      'content-disposition': `attachment; filename="${sha}"`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'cache-control': 'private, max-age=86400, immutable',
    });
    ctx.body = createReadStream(files.pathOf(sha));
  });
  return router;
}

/** One upload: a raw body, or the one file part of a multipart body. */
async function upload(ctx: KoaContext, files: FileStore): Promise<StoredFile> {
  // The caller's cap on what its uploads hold (the operator's policy, asked by the API middleware before this route).
  // Checked once the bytes' digest is known (the same bytes again cost nothing), before they are kept.
  const subjects = uploadCapsOf(ctx);
  const stored = await uploadBody(ctx, files, (sha256, size) => files.admit(subjects, sha256, size));
  await files.countUpload(subjects, stored);
  return stored;
}

/** The body of one upload, stored: a raw body, or the one file part of a multipart body. */
async function uploadBody(ctx: KoaContext, files: FileStore, admit: (sha256: string, size: number) => Promise<void>): Promise<StoredFile> {
  const queryName = typeof ctx.query['filename'] === 'string' ? ctx.query['filename'] : undefined;
  const header = ctx.get('x-herald-filename');
  const given = queryName ?? (header !== '' ? headerFilename(header) : undefined);
  const type = ctx.get('content-type');
  if (!/^multipart\/form-data\b/i.test(type)) {
    const filename = checkFilename(given);
    const declared = Number(ctx.get('content-length'));
    if (Number.isFinite(declared) && declared > files.options.maxBytes) throw new FileTooLargeError();
    return files.store(ctx.req, { filename, contentType: type.split(';')[0]?.trim() || 'application/octet-stream' }, admit);
  }
  if (given !== undefined) checkFilename(given);
  return new Promise<StoredFile>((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: ctx.req.headers, limits: { files: 1, fields: 20 } });
    } catch {
      reject(new InvalidRequestError(ONE_FILE_PART));
      return;
    }
    let storing: Promise<StoredFile> | undefined;
    let extra = false;
    parser.on('file', (_field, stream, info) => {
      if (storing !== undefined) {
        extra = true;
        stream.resume();
        return;
      }
      let name: string;
      try {
        name = checkFilename(given ?? info.filename);
      } catch (err) {
        stream.resume();
        storing = Promise.reject(err);
        storing.catch(() => undefined);
        return;
      }
      // Through a PassThrough: the store's pipeline ends it, and a refused file is drained, not left paused.
      const body = new PassThrough();
      stream.pipe(body);
      storing = files.store(body, { filename: name, contentType: info.mimeType || 'application/octet-stream' }, admit);
      storing.catch(() => stream.resume());
    });
    parser.on('filesLimit', () => (extra = true));
    parser.on('error', () => reject(new InvalidRequestError(ONE_FILE_PART)));
    parser.on('close', () => {
      if (storing === undefined || extra) {
        if (storing !== undefined) storing.catch(() => undefined);
        reject(new InvalidRequestError(ONE_FILE_PART));
        return;
      }
      storing.then(resolve, reject);
    });
    ctx.req.pipe(parser);
  });
}

/** POST /mcp/attachments/download (MCP: download_attachment). */
export function fileOperations(files: FileStore, reader: AttachmentReader): OperationHandlers {
  return () => ({
    downloadAttachment: async (_c, body) => {
      const input = body as { channel_id: string; message_id: string; attachment_id: string };
      const outcome = await reader.fetch(input, files);
      if ('error' in outcome) return { status: outcome.status, body: { error: outcome.error } };
      return reply('downloadAttachment', 200, outcome);
    },
  });
}
