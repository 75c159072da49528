import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';

export const MAX_BODY_BYTES = 65_536;

/**
 * How much of an over-limit body is read and thrown away before answering 413, and for how long.
 * Answering (and closing) while the client is still sending would leave unread bytes behind: the
 * connection is then reset and the client may never see the 413; an unread body left on a
 * keep-alive connection would instead hold up the next request on it.
 */
const DRAIN_MAX_BYTES = 1_048_576;
const DRAIN_MAX_MS = 5_000;

export type BodyResult = { ok: true; value: unknown } | { ok: false; problem: 'too_large' | 'invalid_json' | 'aborted' };

/**
 * Read and parse a JSON body; over the limit it is refused before any parsing. After `too_large`
 * the rest of the body has been discarded (up to DRAIN_MAX_BYTES), and keeps being discarded, so
 * the connection stays usable; answer with `Connection: close` to be safe.
 */
export async function readJsonBody(req: IncomingMessage): Promise<BodyResult> {
  let text: string;
  try {
    text = await getRawBody(req, { limit: MAX_BODY_BYTES, encoding: 'utf-8' });
  } catch (err) {
    const type = typeof err === 'object' && err !== null ? (err as { type?: string }).type : undefined;
    if (type === 'entity.too.large') {
      await discardBody(req);
      return { ok: false, problem: 'too_large' };
    }
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

/**
 * Throw away the rest of a body raw-body stopped reading (it leaves the stream paused): wait
 * until it ends, or DRAIN_MAX_BYTES / DRAIN_MAX_MS have passed, whichever comes first. The stream
 * stays flowing afterwards, so whatever else arrives is discarded too.
 */
function discardBody(req: IncomingMessage): Promise<void> {
  if (req.readableEnded || req.destroyed) return Promise.resolve();
  const declared = Number(req.headers['content-length']);
  const waitForEnd = !(declared > MAX_BODY_BYTES + DRAIN_MAX_BYTES);
  req.resume();
  if (!waitForEnd) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = (): void => {
      clearTimeout(timer);
      req.off('data', onData).off('end', done).off('close', done).off('error', done);
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > DRAIN_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DRAIN_MAX_MS);
    req.on('data', onData).on('end', done).on('close', done).on('error', done);
  });
}
