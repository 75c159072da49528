import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/infra/db/database.js';
import type { Database } from '../src/schema.js';
import { linesTagged, pruneLines, readLines, storeLine } from '../src/platforms/irc/irc-line.repository.js';
import { migratedStore, type MigratedStore } from './support/db.js';
import { tablesOf } from '../src/infra/db/tables.js';
import type { IrcDb } from '../src/platforms/irc/irc-line.table.js';

/** What the IRC observer keeps: one row per msgid, bounded by age and by count per channel. */
describe('IRC lines in the store', () => {
  let fixture: MigratedStore | undefined;
  let store: Store<Database>;

  beforeAll(async () => {
    fixture = await migratedStore();
    ({ store } = fixture);
  });
  afterAll(async () => {
    await fixture?.close();
  });

  const line = (channel: string, n: number, at: Date, tag?: string) => ({ channel, nick: 'ada', text: `line ${n}`, time: at, msgid: `${channel}~${n}`, deliveryTag: tag });

  it('stores a msgid once, however many observers or replays saw it', async () => {
    const at = new Date();
    await storeLine(tablesOf<IrcDb>(store.db), line('#once', 1, at));
    await storeLine(tablesOf<IrcDb>(store.db), line('#once', 1, at));
    expect(await readLines(tablesOf<IrcDb>(store.db), '#once', undefined, 10)).toHaveLength(1);
  });

  it('finds a send\'s lines by its tag, not another send\'s whose id shares a prefix or holds LIKE wildcards', async () => {
    const at = new Date();
    await storeLine(tablesOf<IrcDb>(store.db), line('#tags', 1, at, 'ab_c:0/2'));
    await storeLine(tablesOf<IrcDb>(store.db), line('#tags', 2, at, 'ab_c:1/2'));
    await storeLine(tablesOf<IrcDb>(store.db), line('#tags', 3, at, 'abxc:0/1'));
    await storeLine(tablesOf<IrcDb>(store.db), line('#tags', 4, at, 'ab_cd'));
    expect((await linesTagged(tablesOf<IrcDb>(store.db), '#tags', 'ab_c')).map((r) => r.delivery_tag)).toEqual(['ab_c:0/2', 'ab_c:1/2']);
  });

  it('prunes lines past the age limit and beyond the newest N of each channel', async () => {
    const now = Date.now();
    for (let i = 0; i < 6; i++) await storeLine(tablesOf<IrcDb>(store.db), line('#busy', i, new Date(now - (6 - i) * 1000)));
    await storeLine(tablesOf<IrcDb>(store.db), line('#quiet', 1, new Date(now - 10 * 24 * 3600 * 1000)));
    await storeLine(tablesOf<IrcDb>(store.db), line('#quiet', 2, new Date(now)));
    await pruneLines(tablesOf<IrcDb>(store.db), new Date(now - 8 * 24 * 3600 * 1000), 3);
    expect((await readLines(tablesOf<IrcDb>(store.db), '#busy', undefined, 10)).map((r) => r.text)).toEqual(['line 5', 'line 4', 'line 3']);
    expect((await readLines(tablesOf<IrcDb>(store.db), '#quiet', undefined, 10)).map((r) => r.text)).toEqual(['line 2']);
  });
});
