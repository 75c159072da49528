import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';

export const MAX_BODY_BYTES = 65_536;

export type BodyResult = { ok: true; value: unknown } | { ok: false; problem: 'too_large' | 'invalid_json' };

/** Read and parse a JSON body; over the limit it is refused before any parsing. */
export async function readJsonBody(req: IncomingMessage): Promise<BodyResult> {
  let text: string;
  try {
    text = await getRawBody(req, { limit: MAX_BODY_BYTES, encoding: 'utf-8' });
  } catch (err) {
    if (typeof err === 'object' && err !== null && (err as { type?: string }).type === 'entity.too.large') {
      return { ok: false, problem: 'too_large' };
    }
    throw err;
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, problem: 'invalid_json' };
  }
}
