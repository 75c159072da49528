import type { Platforms } from '../../platforms/platform.js';
import type { ChatTarget, DeliveryRow, SelfSendingKind, SelfSentOutcome } from '../deliveries/index.js';

/** A chat send's request_id in the one outbox: chat ids keep their own namespace. */
export const chatRequestId = (id: string): string => `chat:${id}`;
/** A chat send's own id (what the chat tools answer, and every line's key) from its request_id. */
export const chatIdOf = (requestId: string): string => requestId.slice('chat:'.length);

/** How far back another send may have created a message this one's proof could mistake for its own. */
const TWIN_LOOKBACK_MS = 10 * 60_000;

/**
 * A chat send, kind `chat` of the deliveries outbox: its text is split into lines, each carrying
 * the send's id. When an attempt may have got some lines out (a doubtful failure, or a process
 * that died mid-send), the engine has the platform prove which lines are already in the channel
 * (`Chat.sentParts`) and the next send sends only the rest; a platform that cannot tell leaves
 * the send in doubt rather than risk a duplicate.
 */
export function chatSendKind(transports: Platforms): SelfSendingKind<ChatTarget> {
  return {
    kind: 'chat',
    channelOf: (target) => target.channel,
    async send(target, body, context, found): Promise<SelfSentOutcome> {
      const { row, signal } = context;
      const chat = transports.get(target.transport)?.chat;
      if (chat === undefined) return { status: 'failed', reason: `transport ${target.transport} is not configured for chat` };
      // Parts the proof did not find are sent fresh: nothing relies on a nonce window here.
      const sent = await chat.send(target.channel, body.content ?? '', target.sender, chatIdOf(row.request_id), found, signal);
      if (!sent.confirmed) {
        return { status: 'unconfirmed', messageIds: sent.messageIds, reason: 'the platform gives no proof of delivery (the IRC server lacks labeled-response or echo-message)' };
      }
      return { status: 'delivered', messageIds: sent.messageIds };
    },
    async prove(target, _doubt, context): Promise<Map<number, string> | undefined> {
      const { row, signal, log } = context;
      const chat = transports.get(target.transport)?.chat;
      if (chat === undefined) return undefined;
      const text = row.body.content ?? '';
      const siblings = async (): Promise<DeliveryRow[]> =>
        (await context.siblings(new Date(row.created_at.getTime() - TWIN_LOOKBACK_MS))).filter((o) => sameChannel(o.target as ChatTarget, target));
      const proof = {
        text,
        sender: target.sender,
        // Since the send was stored, not since the doubt began: a platform's failure may have
        // understated what an earlier attempt got out, and a wider look costs only a longer read.
        since: row.created_at,
        taken: async (ids: readonly string[]) => takenIds(await siblings(), ids),
        twins: async () => (await siblings()).some((o) => isUnsettledTwin(o, target, text)),
      };
      const seen = await chat.sentParts(target.channel, chatIdOf(row.request_id), signal, proof);
      if (seen !== undefined && seen.size > 0) log.info({ parts_found: seen.size }, 'lines of an earlier attempt found in the channel');
      return seen;
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
