import type { Transports } from '../../transports/transport.js';
import type { ChatTarget, DeliveryRow, SelfSendingKind, SelfSentOutcome } from '../deliveries/index.js';

/** A chat send's request_id in the one outbox: chat ids keep their own namespace. */
export const chatRequestId = (id: string): string => `chat:${id}`;
/** A chat send's own id (what the chat tools answer, and every line's key) from its request_id. */
export const chatIdOf = (requestId: string): string => requestId.slice('chat:'.length);

/**
 * How long after a create that may have happened the next attempt waits before asking the
 * platform for proof: clock skew and a request the platform finished after Herald stopped waiting.
 */
const PROOF_SETTLE_MS = 11_000;
/** How far back another send may have created a message this one's proof could mistake for its own. */
const TWIN_LOOKBACK_MS = 10 * 60_000;

/**
 * A chat send, kind `chat` of the deliveries outbox: its text is split into lines, each carrying
 * the send's id. An attempt after the first (a retry, or a re-drive after the process died
 * mid-send) first asks the platform (`Chat.sentParts`) which lines are already in the channel and
 * sends only the rest; a platform that cannot tell leaves the send `unconfirmed` rather than risk
 * a duplicate.
 */
export function chatSendKind(transports: Transports): SelfSendingKind<ChatTarget> {
  return {
    kind: 'chat',
    proofSettleMs: PROOF_SETTLE_MS,
    async send(target, body, context): Promise<SelfSentOutcome> {
      const { row, signal, log } = context;
      const chat = transports.get(target.transport)?.chat;
      if (chat === undefined) return { status: 'failed', reason: `transport ${target.transport} is not configured for chat` };
      const id = chatIdOf(row.request_id);
      const text = body.content ?? '';
      let already = new Map<number, string>();
      if (row.attempts > 1) {
        // An earlier attempt may have got some lines out: the platform's proof says which.
        const siblings = async (): Promise<DeliveryRow[]> =>
          (await context.siblings(new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))).filter((o) => sameChannel(o.target as ChatTarget, target));
        const proof = {
          text,
          sender: target.sender,
          since: row.created_at,
          taken: async (ids: readonly string[]) => takenIds(await siblings(), ids),
          twins: async () => (await siblings()).some((o) => isUnsettledTwin(o, target, text)),
        };
        const seen = await chat.sentParts(target.channel, id, signal, proof);
        if (seen === undefined) {
          log.warn('an earlier attempt may have sent this and the platform cannot tell; not sending again');
          return { status: 'unconfirmed', reason: 'an earlier attempt may have sent it, and the platform cannot tell whether it did' };
        }
        already = seen;
        if (seen.size > 0) log.info({ parts_found: seen.size }, 'lines of an earlier attempt found in the channel; sending only the rest');
      }
      // Parts the proof did not find are sent fresh: nothing relies on a nonce window here.
      const sent = await chat.send(target.channel, text, target.sender, id, already, signal);
      if (!sent.confirmed) {
        return { status: 'unconfirmed', messageIds: sent.messageIds, reason: 'the platform gives no proof of delivery (the IRC server lacks labeled-response or echo-message)' };
      }
      return { status: 'delivered', messageIds: sent.messageIds };
    },
  };
}

function sameChannel(a: ChatTarget, b: ChatTarget): boolean {
  return a.transport === b.transport && a.channel === b.channel;
}

/** Of `messageIds`, those another chat send in the same channel recorded as its own. */
function takenIds(others: readonly DeliveryRow[], messageIds: readonly string[]): Set<string> {
  const wanted = new Set(messageIds);
  const taken = new Set<string>();
  for (const o of others) for (const id of JSON.parse(o.message_ids ?? '[]') as string[]) if (wanted.has(id)) taken.add(id);
  return taken;
}

/** Another send of the same text, by the same sender to the same channel, not settled with its ids. */
function isUnsettledTwin(o: DeliveryRow, target: ChatTarget, text: string): boolean {
  const t = o.target as ChatTarget;
  return t.sender === target.sender && o.body.content === text && o.message_ids === null && ['pending', 'in_flight', 'unconfirmed'].includes(o.status);
}
