import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tablesOf } from '../src/infra/db/tables.js';
import { DELIVERY_TAG, IrcConnection, type ChannelLine } from '../src/platforms/irc/irc-connection.js';
import { linesTagged } from '../src/platforms/irc/irc-line.repository.js';
import type { IrcDb } from '../src/platforms/irc/irc-line.table.js';
import { IrcMetrics, IrcPlatform } from '../src/platforms/irc/irc-platform.js';
import { TransportError, type ChatSendProof } from '../src/platforms/platform.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { ircSkipReason, startIrcd, type Ircd } from './support/inspircd.js';
import { waitFor } from './support/wait.js';

const skip = ircSkipReason();
const log = pino({ level: 'silent' });

/**
 * The IRC proof reads the observer's record: it may call a line absent only for the span the
 * observer read without a break (counting what the server replayed when it joined). Before that
 * (no observer in the channel, a reconnect, another replica's lease) it cannot tell.
 */
describe.skipIf(skip !== undefined)('the IRC proof trusts the observer only where it read the channel', () => {
  let ircd: Ircd;
  let fixture: MigratedStore;
  let transport: IrcPlatform | undefined;
  const conns: IrcConnection[] = [];
  /** The keys the transport called Herald's own lines (onOwnLine). */
  const owned: string[] = [];

  beforeAll(async () => {
    ircd = await startIrcd();
    fixture = await migratedStore();
  }, 90_000);
  afterAll(async () => {
    await transport?.close();
    await Promise.all(conns.map((c) => c.close()));
    await fixture?.close();
    await ircd?.dispose();
  }, 30_000);

  const connect = async (nick: string, channel: string, onLine?: (l: ChannelLine) => void): Promise<IrcConnection> => {
    const conn = new IrcConnection({ server: { host: '127.0.0.1', port: ircd.port, tls: false }, nick, log, linesPerSecond: 1000, echoTimeoutMs: 5_000, ...(onLine ? { onLine } : {}) });
    conns.push(conn);
    await conn.connect();
    await conn.join(channel);
    return conn;
  };
  const proof = (since: Date, sender = 'ada'): ChatSendProof => ({ text: 'x', sender, since, taken: async () => new Set(), twins: async () => false });
  const observer = async (): Promise<IrcPlatform> => {
    const t = new IrcPlatform({
      server: { host: '127.0.0.1', port: ircd.port, tls: false },
      nick: 'herald',
      channels: [],
      db: tablesOf<IrcDb>(fixture.store.db),
      log,
      metrics: new IrcMetrics(new Registry()),
      linesPerSecond: 1000,
      echoTimeoutMs: 5_000,
      senderIdleMs: 60_000,
      retention: { maxAgeMs: 86_400_000, perChannel: 10_000 },
      clockSkewMs: 0,
      onOwnLine: async (key) => {
        owned.push(key);
      },
    });
    await t.observeAll();
    return t;
  };
  const undecided = (p: Promise<unknown>) => expect(p).rejects.toSatisfy((e) => e instanceof TransportError && e.failure.kind === 'transient' && e.failure.heldElsewhere !== true);

  it('a line said before the observer joined, and gone from the server\'s replay, is undecided, not absent', async () => {
    // A send got its first line out while no observer was in #gap; the channel then moved on
    // past what the server replays (50 lines), so the observer joining now never reads it.
    const since = new Date();
    const ada = await connect('ada', '#gap');
    await ada.send('#gap', 'part one', { [DELIVERY_TAG]: 'k1:0/2' }, AbortSignal.timeout(5_000));
    const eve = await connect('eve', '#gap');
    for (let i = 0; i < 60; i++) await eve.send('#gap', `chatter ${i}`, {}, AbortSignal.timeout(5_000));
    transport = await observer();
    // Before: an empty map, "nothing went out", and the first line would be sent again.
    await undecided(transport.chat.sentParts('#gap', 'k1', AbortSignal.timeout(5_000), proof(since)));
    await undecided(transport.history.listBetween('#gap', since, new Date(), 100));
  }, 60_000);

  it('once the observer has read the channel since before the send, absent and found are both told', async () => {
    const t: IrcPlatform = transport ?? (transport = await observer());
    await t.chat.createChannel('#seen');
    const since = await waitFor(() => {
      const now = new Date();
      const from = (t as unknown as { held: IrcConnection }).held.readingSince('#seen');
      return from !== undefined && from.getTime() < now.getTime() && now;
    }, 'a moment after the observer joined');
    expect(await t.chat.sentParts('#seen', 'k2', AbortSignal.timeout(5_000), proof(since, 'ada2'))).toEqual(new Map());
    const ada = await connect('ada2', '#seen');
    await ada.send('#seen', 'part one', { [DELIVERY_TAG]: 'k2:0/2' }, AbortSignal.timeout(5_000));
    await waitFor(async () => (await t.chat.sentParts('#seen', 'k2', AbortSignal.timeout(5_000), proof(since, 'ada2')))?.size === 1, 'the line in the record');
    expect((await t.history.listBetween('#seen', since, new Date(), 100)).messages.map((m) => m.fingerprint)).toEqual(['part one']);
  }, 60_000);

  it("a delivery tag another member wrote is not Herald's: neither a part of the send nor its own line", async () => {
    const t: IrcPlatform = transport ?? (transport = await observer());
    await t.chat.createChannel('#forge');
    const since = await waitFor(() => {
      const now = new Date();
      const from = (t as unknown as { held: IrcConnection }).held.readingSince('#forge');
      return from !== undefined && from.getTime() < now.getTime() && now;
    }, 'a moment after the observer joined');
    // A member with message-tags forges a part of Herald's send k3, and the last (only) part of k4.
    const mallory = await connect('mallory', '#forge');
    await mallory.send('#forge', 'FORGED', { [DELIVERY_TAG]: 'k3:1/2' }, AbortSignal.timeout(5_000));
    await mallory.send('#forge', 'FORGED', { [DELIVERY_TAG]: 'k4' }, AbortSignal.timeout(5_000));
    // Herald's own send, under an agent's nick, still counts.
    await t.chat.send('#forge', 'a real line', 'ada5', 'k5', new Map(), AbortSignal.timeout(5_000));
    const db = tablesOf<IrcDb>(fixture.store.db);
    await waitFor(async () => (await linesTagged(db, '#forge', 'k3')).length === 1 && (await linesTagged(db, '#forge', 'k4')).length === 1 && (await linesTagged(db, '#forge', 'k5')).length === 1, 'the three lines stored');
    await (t as unknown as { stored(): Promise<void> }).stored();
    // Before: k3's part 1 counted as sent (a resend would skip it), and k4 was recorded as Herald's own message.
    expect(await t.chat.sentParts('#forge', 'k3', AbortSignal.timeout(5_000), proof(since))).toEqual(new Map());
    expect(owned).not.toContain('k3');
    expect(owned).not.toContain('k4');
    expect(owned).toContain('k5');
    expect((await t.chat.sentParts('#forge', 'k5', AbortSignal.timeout(5_000), proof(since, 'ada5')))?.size).toBe(1);
  }, 60_000);

  it('a link that dropped breaks the record: after the rejoin only the server\'s replay reaches back', async () => {
    const lines: ChannelLine[] = [];
    const conn = await connect('watcher', '#drop', (l) => lines.push(l));
    const before = conn.readingSince('#drop');
    expect(before).toBeInstanceOf(Date);
    await ircd.stop();
    await waitFor(() => conn.readingSince('#drop') === undefined, 'the record to break with the link');
    await ircd.start();
    await waitFor(() => conn.readingSince('#drop'), 'the rejoin', 20_000);
    expect(conn.readingSince('#drop')?.getTime()).toBeGreaterThan(before?.getTime() ?? Infinity);
  }, 60_000);
});
