import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

/**
 * One request whose bytes leave in one write, only after a last check passes on a connected socket.
 *
 * `fetch` cannot promise that. It connects, writes the head, then streams the body in later turns
 * of the event loop. A process stalled between those turns (a long pause, `SIGSTOP`) has already
 * sent the head of a create. The rest leaves when the process is continued, long after the checks
 * made before `fetch` was called, after its lease and the new owner's last look at the channel.
 * Slack then creates the message late, and no one records it.
 *
 * Here the socket is connected first. Then `lastCheck` runs (fault point, fence, deadline, abort),
 * and in the same synchronous turn the head and the whole body go to the kernel in a single
 * write. Once they are there, stalling the process changes nothing. The only gap left is between
 * `lastCheck` and that write: a few statements, with no I/O and no await between them.
 *
 * A body larger than the socket's send buffer may still be written in parts; Slack's requests
 * (form-encoded, a message at most 40,000 characters) fit in it.
 */

const agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };

export interface OneWriteRequest {
  method: string;
  headers: Readonly<Record<string, string>>;
  body: string;
  signal?: AbortSignal | undefined;
}

/** Send `request` to `url`: `lastCheck` throws to keep it home (nothing leaves); `onLeaving` runs just before the write. */
export function oneWrite(url: URL, request: OneWriteRequest, lastCheck: () => void, onLeaving: () => void): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    const https = url.protocol === 'https:';
    const headers: OutgoingHttpHeaders = { ...request.headers, 'content-length': Buffer.byteLength(request.body) };
    const options = { method: request.method, headers, agent: https ? agents.https : agents.http, ...(request.signal !== undefined ? { signal: request.signal } : {}) };
    const req = https ? httpsRequest(url, options) : httpRequest(url, options);
    // `on`, not `once`: a destroyed request may report more than one error, and an unheard one would throw.
    req.on('error', reject);
    let answered = false;
    req.once('response', (res) => {
      answered = true;
      collect(res).then(resolve, reject);
    });
    // An answer that switches protocols is no answer (node:http then emits neither 'response' nor
    // 'error'), nor is a connection that closes without one: the call must end all the same.
    req.once('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('answered with a protocol upgrade, not a Web API answer'));
    });
    req.once('close', () => {
      if (!answered) reject(new Error('connection closed without an answer'));
    });
    req.once('socket', (socket) => {
      const send = (): void => {
        try {
          lastCheck();
        } catch (err) {
          req.destroy();
          reject(err);
          return;
        }
        onLeaving();
        // No head was written yet, so the head and the string body go out together.
        req.end(request.body);
      };
      // A pooled socket is connected (and its TLS handshake done) already; a new one is not yet.
      if (!socket.connecting) send();
      else socket.once(https ? 'secureConnect' : 'connect', send);
    });
  });
}

/** The most of an answer read (a history page is well under it); past it the call fails. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;

/** The whole answer, as a fetch Response (the Web API client reads it so), decoded if it came compressed. */
async function collect(res: IncomingMessage): Promise<Response> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > MAX_ANSWER_BYTES) {
      res.destroy();
      throw new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  const headers = new Headers();
  // No Accept-Encoding is sent, so none is expected; one that comes anyway is decoded (as fetch would).
  const encoding = String(res.headers['content-encoding'] ?? '').trim().toLowerCase();
  const decode = Object.hasOwn(DECODERS, encoding) ? DECODERS[encoding] : undefined;
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined || (decode !== undefined && (name === 'content-encoding' || name === 'content-length'))) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const status = res.statusCode ?? 502;
  const bodyless = status === 204 || status === 304 || status < 200;
  const body = Buffer.concat(chunks);
  return new Response(bodyless ? null : decode !== undefined ? decode(body) : body, { status, statusText: res.statusMessage ?? '', headers });
}

const DECODERS: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: (b) => gunzipSync(b, { maxOutputLength: MAX_ANSWER_BYTES }),
  'x-gzip': (b) => gunzipSync(b, { maxOutputLength: MAX_ANSWER_BYTES }),
  deflate: (b) => inflateSync(b, { maxOutputLength: MAX_ANSWER_BYTES }),
  br: (b) => brotliDecompressSync(b, { maxOutputLength: MAX_ANSWER_BYTES }),
};
