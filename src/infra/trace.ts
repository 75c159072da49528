/**
 * W3C Trace Context (`traceparent`): a caller's trace id, read strictly so only a well-formed
 * value reaches a log line. Version 00 exactly (`00-<32 hex trace id>-<16 hex parent id>-<2 hex
 * flags>`, lower case), and neither id all zeros (the standard's invalid value); anything else is
 * no trace at all, never echoed.
 */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

export interface TraceContext {
  /** The trace's id: 32 lower-case hex digits. */
  readonly trace_id: string;
  /** The caller's span (the parent of what this request does): 16 lower-case hex digits. */
  readonly span_id: string;
  /** The header as received, valid: what to pass on to the next hop. */
  readonly traceparent: string;
}

/** The trace a `traceparent` value names, or undefined when it is missing or malformed. */
export function parseTraceparent(value: unknown): TraceContext | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT.exec(value);
  if (m === null) return undefined;
  const [, traceId = '', spanId = ''] = m;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { trace_id: traceId, span_id: spanId, traceparent: value };
}
