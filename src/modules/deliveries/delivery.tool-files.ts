import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { BridgeClient } from '../../client/bridge-client.js';
import type { JsonSchema } from '../../infra/mcp/tool.js';
import type { MessageBody } from './delivery.js';

/**
 * Which `{path}` a tool call may attach: a path is the local user's word (docs/architecture.md's
 * "local authority"). `any`: stdio, the person who started `herald mcp`. `folder`: over HTTP, only
 * files inside the folder the operator named (HERALD_MCP_FILES_DIR). `none`: over HTTP without one.
 */
export type LocalFiles = { readonly kind: 'any' } | { readonly kind: 'folder'; readonly dir: string } | { readonly kind: 'none' };

/**
 * The one answer for a path that cannot be attached: missing, outside the folder, not a file,
 * unreadable or a symlink all read alike, so a caller learns nothing of what exists on the server.
 */
export const PATH_REFUSED = 'is not a file this server may attach';

/** Marks the `path` property: listed only where a caller may give one (src/mcp/server.ts). */
export const LOCAL_PATH = 'x-herald-local-path';

/** Most files one tool call may attach (Discord's 10 per message). */
const MAX_FILES = 10;
/** A file read from the agent's machine larger than this is refused before it is read (Herald's own cap is HERALD_FILE_MAX_BYTES). */
const MAX_LOCAL_BYTES = 25 * 1024 * 1024;

/** The `files` argument of post_message and send_dm. */
export const filesArgument: JsonSchema = {
  type: 'array',
  maxItems: MAX_FILES,
  description:
    "Optional files to attach (at most 10; on Discord at most 10 MiB each and 25 MiB in all): each {base64, filename}, or {path} where this server offers it — on stdio any file of the user who started herald mcp, over HTTP only a file inside the folder its operator named (HERALD_MCP_FILES_DIR; a path relative to it, or absolute inside it). Optional description (alt text). They are uploaded to Herald first, then sent with the message exactly once.",
  items: {
    type: 'object',
    additionalProperties: false,
    properties: {
      path: { type: 'string', minLength: 1, maxLength: 4096, description: 'A file herald mcp may read: on stdio, any of its user; over HTTP, inside HERALD_MCP_FILES_DIR.', [LOCAL_PATH]: true },
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
 * The bytes of a `{path}`, or undefined when it may not be attached (whatever the reason: one
 * answer). In a folder: the path resolved with realpath (symlinks and `..` followed to where they
 * lead) must lie inside the folder's own realpath, and is then opened without following a final
 * symlink (O_NOFOLLOW), so one swapped in after the check is not followed; size and kind are read
 * from the open file itself.
 */
async function readLocal(where: string, access: LocalFiles): Promise<Buffer | 'too large' | undefined> {
  if (access.kind === 'none') return undefined;
  let file = path.resolve(where);
  try {
    if (access.kind === 'folder') {
      const root = await realpath(access.dir);
      file = await realpath(path.resolve(root, where));
      if (file !== root && !file.startsWith(root.endsWith(path.sep) ? root : root + path.sep)) return undefined;
    }
    const handle = await open(file, constants.O_RDONLY | (access.kind === 'folder' ? constants.O_NOFOLLOW : 0));
    try {
      const info = await handle.stat();
      if (!info.isFile()) return undefined;
      if (info.size > MAX_LOCAL_BYTES) return 'too large';
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch {
    return undefined;
  }
}

/**
 * Upload each file of a tool call's `files` argument and answer the body's `attachments`, or
 * words for the agent on the first that cannot be read or is refused. Absent or empty: nothing.
 * A `{path}` is read only as `access` allows (stdio: any; HTTP: inside the operator's folder).
 */
export async function uploadToolFiles(bridge: BridgeClient, files: unknown, access: LocalFiles = { kind: 'none' }): Promise<{ attachments?: NonNullable<MessageBody['attachments']> } | { error: string }> {
  if (files === undefined) return {};
  if (!Array.isArray(files)) return { error: 'files must be an array of {path} or {base64, filename}' };
  if (files.length > MAX_FILES) return { error: `at most ${MAX_FILES} files per message` };
  const attachments: NonNullable<MessageBody['attachments']> = [];
  for (const [i, raw] of (files as Record<string, unknown>[]).entries()) {
    const f = typeof raw === 'object' && raw !== null ? raw : {};
    let data: Buffer;
    let filename = typeof f['filename'] === 'string' ? f['filename'] : undefined;
    if (typeof f['path'] === 'string') {
      // Said before the disk is touched: over HTTP without a folder no path is read at all.
      if (access.kind === 'none') return { error: `files[${i}].path is not accepted by this server (herald mcp over HTTP reads no path unless its operator names a folder, HERALD_MCP_FILES_DIR): give {base64, filename} instead` };
      const read = await readLocal(f['path'], access);
      if (read === undefined) return { error: `files[${i}].path ${PATH_REFUSED}${access.kind === 'folder' ? ' (only files inside the folder its operator named)' : ''}` };
      if (read === 'too large') return { error: `files[${i}] is larger than 25 MiB, more than one message can carry` };
      data = read;
      filename ??= path.basename(f['path']);
    } else if (typeof f['base64'] === 'string') {
      if (filename === undefined) return { error: `files[${i}] with base64 needs a filename` };
      data = Buffer.from(f['base64'], 'base64');
    } else {
      return { error: `files[${i}] needs either path or base64 (with filename)` };
    }
    const uploaded = await bridge.call('uploadFile', { query: { filename }, body: data, contentType: contentTypeOf(filename) });
    if (!uploaded.ok) return { error: `files[${i}] (${filename}) was refused: ${uploaded.error}` };
    attachments.push({ file: uploaded.data.file, filename, ...(typeof f['description'] === 'string' ? { description: f['description'] } : {}) });
  }
  return attachments.length > 0 ? { attachments } : {};
}
