import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';

export const MAX_BODY_BYTES = 65_536;

export type BodyResult = { ok: true; value: unknown } | { ok: false; problem: 'too_large' | 'invalid_json' | 'aborted' };

/** Read and parse a JSON body; over the limit it is refused before any parsing. */
export async function readJsonBody(req: IncomingMessage): Promise<BodyResult> {
  let text: string;
  try {
    text = await getRawBody(req, { limit: MAX_BODY_BYTES, encoding: 'utf-8' });
  } catch (err) {
    const type = typeof err === 'object' && err !== null ? (err as { type?: string }).type : undefined;
    if (type === 'entity.too.large') return { ok: false, problem: 'too_large' };
    // The client went away before sending its body: there is no one to answer.
    if (type === 'request.aborted' || type === 'stream.not.readable' || req.destroyed) return { ok: false, problem: 'aborted' };
    throw err;
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, problem: 'invalid_json' };
  }
}
