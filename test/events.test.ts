import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/infra/db/database.js';
import { Events } from '../src/infra/db/events.js';
import { onPostgres, testDatabase, type TestDatabase } from './support/db.js';
import { waitFor } from './support/wait.js';

/** Cross-process events (src/infra/db/events.ts): on PostgreSQL through NOTIFY, on PGlite in process. */

let db: TestDatabase | undefined;
const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await db?.drop();
  db = undefined;
});

async function events(): Promise<Events> {
  db ??= await testDatabase();
  const store: Store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
  const e = new Events(store);
  closing.push(() => store.close(), () => e.close());
  return e;
}

describe('events', () => {
  it('a burst is told once to this process, with the ids, and not again through its own NOTIFY', async () => {
    const here = await events();
    const heard: (readonly string[] | undefined)[] = [];
    await here.subscribe('t', (ids) => heard.push(ids));
    here.publish('t', 'a');
    here.publish('t', 'b');
    here.publish('t', 'a');
    here.publish('other', 'c');
    await waitFor(() => heard.length > 0, 'the listener to be told');
    expect(heard).toEqual([['a', 'b']]);
    // The NOTIFY comes back to this process's own LISTEN session: skipped (a later publish is told, alone).
    here.publish('t', 'd');
    await waitFor(() => heard.length > 1, 'the next publish to be told');
    expect(heard).toEqual([['a', 'b'], ['d']]);
  });

  it('a publish without an id, or a burst of too many, means anything of the topic may have changed', async () => {
    const here = await events();
    const heard: (readonly string[] | undefined)[] = [];
    await here.subscribe('t', (ids) => heard.push(ids));
    here.publish('t', 'a');
    here.publish('t');
    await waitFor(() => heard.length > 0, 'the listener to be told');
    for (let i = 0; i < 60; i++) here.publish('t', String(i));
    await waitFor(() => heard.length > 1, 'the burst to be told');
    expect(heard).toEqual([undefined, undefined]);
  });

  it.skipIf(!onPostgres)('another process on the database hears of a burst once, with its ids, through one NOTIFY', async () => {
    const a = await events();
    const b = await events();
    const heard: (readonly string[] | undefined)[] = [];
    const other: (readonly string[] | undefined)[] = [];
    await b.subscribe('scrape', (ids) => heard.push(ids));
    await b.subscribe('storage', (ids) => other.push(ids));
    a.publish('scrape', 'x');
    a.publish('scrape', 'y');
    await waitFor(() => heard.length > 0, 'the other process to hear of it');
    expect(heard).toEqual([['x', 'y']]);
    expect(other).toEqual([]);
    // Unsubscribed: told no more.
    const unsubscribe = await b.subscribe('storage', () => other.push(['late']));
    unsubscribe();
    a.publish('storage');
    await waitFor(() => other.length > 0, 'the storage news');
    expect(other).toEqual([undefined]);
  });
});
