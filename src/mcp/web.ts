import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';

/**
 * node:http and the web-standard Request/Response the v2 MCP SDK's HTTP entry (createMcpHandler)
 * speaks, both ways. The request's signal aborts when the client goes away before its answer is
 * written (a cut stream), so the SDK tears that exchange down.
 */
export function webRequest(req: IncomingMessage, res: ServerResponse, given: { body?: string; signal?: AbortSignal } = {}): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const method = req.method ?? 'GET';
  // A body already read (`given.body`: the caller looked at it first) goes as it was read.
  const body = method === 'GET' || method === 'HEAD' ? undefined : (given.body ?? (Readable.toWeb(req) as ReadableStream<Uint8Array>));
  // `given.signal`: the server's own reason to end the exchange too (a token that expires).
  const signal = given.signal === undefined ? gone.signal : AbortSignal.any([gone.signal, given.signal]);
  // The path only: a Host header is the client's word, never parsed here. `duplex` (a streamed
  // body) is Node's fetch option, not in the DOM's RequestInit type.
  const init: RequestInit & { duplex?: 'half' } = { method, headers, signal, ...(body === undefined ? {} : { body, duplex: 'half' }) };
  return new Request(new URL(req.url ?? '/', 'http://localhost'), init);
}

/** A request's body as text, or undefined when it is longer than `limit` bytes. */
export async function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes a web Response to a node:http response, streaming its body (an SSE stream as it comes). */
export async function sendWebResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  const body = Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>);
  await new Promise<void>((resolve) => {
    body.on('error', () => {
      res.destroy();
      resolve();
    });
    res.on('close', () => {
      body.destroy();
      resolve();
    });
    body.pipe(res);
  });
}
