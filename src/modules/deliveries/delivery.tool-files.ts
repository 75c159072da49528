import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { BridgeClient } from '../../client/bridge-client.js';
import type { JsonSchema } from '../../platform/mcp/tool.js';
import type { MessageBody } from './delivery.js';

/** Most files one tool call may attach (Discord's 10 per message). */
const MAX_FILES = 10;
/** A file read from the agent's machine larger than this is refused before it is read (Herald's own cap is HERALD_FILE_MAX_BYTES). */
const MAX_LOCAL_BYTES = 25 * 1024 * 1024;

/** The `files` argument of post_message and send_dm. */
export const filesArgument: JsonSchema = {
  type: 'array',
  maxItems: MAX_FILES,
  description:
    "Optional files to attach (at most 10; on Discord at most 10 MiB each and 25 MiB in all): each either {path} — a file on this machine, read by herald mcp — or {base64, filename}. Optional description (alt text). They are uploaded to Herald first, then sent with the message exactly once.",
  items: {
    type: 'object',
    additionalProperties: false,
    properties: {
      path: { type: 'string', minLength: 1, maxLength: 4096, description: 'A file on the machine herald mcp runs on.' },
      base64: { type: 'string', minLength: 1, description: "The file's bytes, base64." },
      filename: { type: 'string', minLength: 1, maxLength: 255, description: "The file's name as shown (default: the path's last part)." },
      description: { type: 'string', minLength: 1, maxLength: 1024, description: 'Alt text shown with it.' },
    },
  },
};

const TYPES: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', avif: 'image/avif', bmp: 'image/bmp', svg: 'image/svg+xml',
  mp4: 'video/mp4', webm: 'video/webm', mov: 'video/quicktime', mp3: 'audio/mpeg', ogg: 'audio/ogg', wav: 'audio/wav',
  pdf: 'application/pdf', txt: 'text/plain', md: 'text/markdown', csv: 'text/csv', json: 'application/json', zip: 'application/zip',
};

/** A content type from a file name's extension (what Discord shows it as). */
export function contentTypeOf(filename: string): string {
  return TYPES[path.extname(filename).slice(1).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Upload each file of a tool call's `files` argument and answer the body's `attachments`, or
 * words for the agent on the first that cannot be read or is refused. Absent or empty: nothing.
 */
export async function uploadToolFiles(bridge: BridgeClient, files: unknown): Promise<{ attachments?: NonNullable<MessageBody['attachments']> } | { error: string }> {
  if (files === undefined) return {};
  if (!Array.isArray(files)) return { error: 'files must be an array of {path} or {base64, filename}' };
  if (files.length > MAX_FILES) return { error: `at most ${MAX_FILES} files per message` };
  const attachments: NonNullable<MessageBody['attachments']> = [];
  for (const [i, raw] of (files as Record<string, unknown>[]).entries()) {
    const f = typeof raw === 'object' && raw !== null ? raw : {};
    let data: Buffer;
    let filename = typeof f['filename'] === 'string' ? f['filename'] : undefined;
    if (typeof f['path'] === 'string') {
      const where = f['path'];
      try {
        const info = await stat(where);
        if (!info.isFile()) return { error: `files[${i}].path is not a file: ${where}` };
        if (info.size > MAX_LOCAL_BYTES) return { error: `files[${i}] is larger than 25 MiB, more than one message can carry` };
        data = await readFile(where);
      } catch (err) {
        return { error: `files[${i}].path could not be read: ${(err as NodeJS.ErrnoException).code ?? 'error'} (${where})` };
      }
      filename ??= path.basename(where);
    } else if (typeof f['base64'] === 'string') {
      if (filename === undefined) return { error: `files[${i}] with base64 needs a filename` };
      data = Buffer.from(f['base64'], 'base64');
    } else {
      return { error: `files[${i}] needs either path or base64 (with filename)` };
    }
    const uploaded = await bridge.uploadFile(data, filename, contentTypeOf(filename));
    if (!uploaded.ok) return { error: `files[${i}] (${filename}) was refused: ${uploaded.error}` };
    attachments.push({ file: uploaded.data.file, filename, ...(typeof f['description'] === 'string' ? { description: f['description'] } : {}) });
  }
  return attachments.length > 0 ? { attachments } : {};
}
