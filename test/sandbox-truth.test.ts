import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARKDOWN_JS, SANDBOX_PAGE } from '../src/platforms/discord/sandbox/page.js';
import { SANDBOX_IDS } from '../src/platforms/discord/sandbox/ids.js';
import { SandboxState } from '../src/platforms/discord/sandbox/state.js';
import { client } from './support/client.js';
import { testDatabase, type TestDatabase } from './support/db.js';
import { newRequestId, post } from './support/herald.js';
import { startHeraldProcess, type HeraldProcess } from './support/process.js';
import { waitForDelivery } from './support/wait.js';

type Node = { t: string; v?: string; href?: string; c?: Node[] };
const parseMarkdown = new Function(`${MARKDOWN_JS}; return parseMarkdown;`)() as (text: string, inline: boolean) => Node[];

interface SandboxView {
  destinations: { guild_id: string; destination: string; channel_id: string }[] | null;
  messages: { id: string; channel_id: string; content: string }[];
}

describe('sandbox mode keeps its Discord in the data folder, and links open its own messages', () => {
  let db: TestDatabase;
  let proc: HeraldProcess | undefined;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.kill('SIGTERM');
      await proc.exited;
    }
    await db.drop();
  });

  const serve = async (): Promise<{ api: string; sandbox: string }> => {
    proc = await startHeraldProcess(['serve'], {
      PORT: '0',
      HERALD_SANDBOX_PORT: '0',
      HERALD_DATA_DIR: db.dataDir,
      HERALD_POLL_MS: '200',
      ...(db.databaseUrl !== undefined ? { DATABASE_URL: db.databaseUrl } : {}),
    });
    const started = proc.output().split('\n').find((l) => l.includes('"msg":"herald started"')) ?? '{}';
    const { url, sandbox } = JSON.parse(started) as { url: string; sandbox: string };
    return { api: url, sandbox };
  };
  const stop = async () => {
    proc?.kill('SIGTERM');
    expect((await proc?.exited)?.code).toBe(0);
  };
  const sandboxState = async (base: string) => (await (await fetch(`${base}/sandbox/api/state`)).json()) as SandboxView;

  it('shows after a restart what it showed before, with the mapped destinations and a link that opens the message', async () => {
    let urls = await serve();
    const tokens = JSON.parse(await readFile(path.join(db.dataDir, 'sandbox-tokens.json'), 'utf8')) as { bridge: string; admin: string };
    const admin = client(urls.api, tokens.admin);
    const bridge = client(urls.api, tokens.bridge);
    expect((await admin.put(`/admin/destinations/${SANDBOX_IDS.guild}/alerts`, { channel_id: SANDBOX_IDS.channels.alerts })).status).toBe(200);
    const requestId = newRequestId();
    await bridge.post('/mcp/deliveries', post(requestId, 'kept across restarts'));
    const delivered = (await waitForDelivery(bridge, requestId, 'delivered', 'delivered')) as { url: string };
    const before = (await sandboxState(urls.sandbox)).messages.filter((m) => m.content === 'kept across restarts');
    expect(before).toHaveLength(1);
    await stop();

    urls = await serve();
    const after = await sandboxState(urls.sandbox);
    expect(after.messages.filter((m) => m.content === 'kept across restarts')).toEqual(before);
    expect(after.destinations).toEqual([{ guild_id: SANDBOX_IDS.guild, destination: 'alerts', channel_id: SANDBOX_IDS.channels.alerts, transport: 'discord' }]);
    // Written whole (temporary file, then renamed): nothing half-written is left beside it.
    expect((await readdir(db.dataDir)).filter((f) => f.startsWith('sandbox-discord'))).toEqual(['sandbox-discord.json']);

    // The protocol's url names discord.com; the same path on the sandbox opens the message there.
    const pathOfUrl = new URL(delivered.url).pathname;
    expect(pathOfUrl).toBe(`/channels/${SANDBOX_IDS.guild}/${SANDBOX_IDS.channels.alerts}/${before[0]?.id}`);
    const link = await fetch(`${urls.sandbox}${pathOfUrl}`, { redirect: 'manual' });
    expect(link.status).toBe(302);
    expect(link.headers.get('location')).toBe(`/sandbox#m-${before[0]?.id}`);
    expect((await fetch(`${urls.sandbox}/channels/${SANDBOX_IDS.guild}/${SANDBOX_IDS.channels.alerts}/1`, { redirect: 'manual' })).status).toBe(404);
    // Herald hands that link out itself (admin view, and herald mcp's answers), the wire url unchanged.
    const detail = (await client(urls.api, tokens.bridge).get(`/admin/deliveries/${requestId}`)).json as { url: string; link: string };
    expect(detail).toMatchObject({ url: delivered.url, link: `${urls.sandbox}${pathOfUrl}` });
    await stop();
  }, 150_000); // two `herald serve` start-ups: a budget for a loaded 2-core machine, not a sleep
});

describe("the sandbox page's Discord markdown", () => {
  it('shows the pairing code in bold, not between asterisks', () => {
    expect(parseMarkdown('Your pairing code: **ABCDEFGHJKMNPQRSTVWXYZ2345**\n\nValid 10 minutes, single use. Enter it only in `pair`.', false)).toEqual([
      { t: 'text', v: 'Your pairing code: ' },
      { t: 'b', c: [{ t: 'text', v: 'ABCDEFGHJKMNPQRSTVWXYZ2345' }] },
      { t: 'text', v: '\n\nValid 10 minutes, single use. Enter it only in ' },
      { t: 'code', v: 'pair' },
      { t: 'text', v: '.' },
    ]);
  });

  it('renders Discord formatting, code blocks, quotes and https links', () => {
    expect(parseMarkdown('*a* __b__ ~~c~~ ||d|| [site](https://example.com/x) https://example.com/y.', true)).toEqual([
      { t: 'i', c: [{ t: 'text', v: 'a' }] },
      { t: 'text', v: ' ' },
      { t: 'u', c: [{ t: 'text', v: 'b' }] },
      { t: 'text', v: ' ' },
      { t: 's', c: [{ t: 'text', v: 'c' }] },
      { t: 'text', v: ' ' },
      { t: 'spoiler', c: [{ t: 'text', v: 'd' }] },
      { t: 'text', v: ' ' },
      { t: 'a', href: 'https://example.com/x', c: [{ t: 'text', v: 'site' }] },
      { t: 'text', v: ' ' },
      { t: 'a', href: 'https://example.com/y', c: [{ t: 'text', v: 'https://example.com/y' }] },
      { t: 'text', v: '.' },
    ]);
    expect(parseMarkdown('> quoted\n```js\nconst x = "**not bold**";\n```', false)).toEqual([
      { t: 'quote', c: [{ t: 'text', v: 'quoted' }] },
      { t: 'pre', v: 'const x = "**not bold**";\n' },
    ]);
    expect(parseMarkdown('\\*literal\\*', false)).toEqual([{ t: 'text', v: '*' }, { t: 'text', v: 'literal' }, { t: 'text', v: '*' }]);
  });

  it('never turns text into markup or a script link (the page sets only textContent and https hrefs)', () => {
    const hostile = '<img src=x onerror=alert(1)> [click](javascript:alert(1)) **<b>x</b>**';
    const flat = (nodes: Node[]): Node[] => nodes.flatMap((n) => [n, ...flat(n.c ?? [])]);
    const nodes = flat(parseMarkdown(hostile, false));
    expect(nodes.filter((n) => n.t === 'a')).toEqual([]);
    expect(nodes.filter((n) => n.t === 'text').map((n) => n.v).join('')).toBe('<img src=x onerror=alert(1)> [click](javascript:alert(1)) <b>x</b>');
  });
});

/** Just enough of a DOM to run the page's script: elements with tag, class, text, attributes and children. */
class FakeElement {
  children: (FakeElement | string)[] = [];
  className = '';
  id = '';
  href = '';
  rel = '';
  target = '';
  value = '';
  checked = false;
  onclick: unknown;
  readonly classList = { toggle: () => undefined };
  constructor(readonly tag: string) {}
  set textContent(v: string) {
    this.children = [v];
  }
  get textContent(): string {
    return this.children.map((c) => (typeof c === 'string' ? c : c.textContent)).join('');
  }
  append(...nodes: (FakeElement | string)[]): void {
    this.children.push(...nodes);
  }
  replaceChildren(...nodes: (FakeElement | string)[]): void {
    this.children = nodes;
  }
  addEventListener(): void {}
  scrollIntoView(): void {}
  /** The subtree as markup-like text, to look at what the page built. */
  toString(): string {
    const attrs = (this.href ? ` href="${this.href}"` : '') + (this.id ? ` id="${this.id}"` : '');
    return `<${this.tag}${attrs}>${this.children.map((c) => (typeof c === 'string' ? c : c.toString())).join('')}</${this.tag}>`;
  }
}

describe('the sandbox page script', () => {
  it('renders messages with anchors, markdown and mapped destinations, from the state the control API serves', () => {
    const byId = new Map<string, FakeElement>(['channels', 'destinations', 'reply', 'user', 'invoke', 'command', 'inGuild', 'manage', 'write', 'channel', 'text', 'replyTo'].map((id) => [id, new FakeElement('div')]));
    const document = {
      createElement: (tag: string) => new FakeElement(tag),
      createTextNode: (text: string) => text,
      getElementById: (id: string) => byId.get(id) ?? null,
    };
    const script = /<script>([\s\S]*)<\/script>/.exec(SANDBOX_PAGE)?.[1] ?? '';
    const render = new Function('document', 'location', 'fetch', 'setInterval', `${script}; return render;`)(
      document,
      { hash: '' },
      () => new Promise(() => undefined),
      () => 0,
    ) as (state: unknown) => void;
    render({
      destinations: [
        { guild_id: SANDBOX_IDS.guild, destination: 'alerts', channel_id: SANDBOX_IDS.channels.alerts, transport: 'discord' },
        { guild_id: SANDBOX_IDS.guild, destination: 'digest', channel_id: 'C0GENERAL01', transport: 'slack' },
      ],
      guilds: [{ id: SANDBOX_IDS.guild, name: 'Sandbox Guild', channels: [{ id: SANDBOX_IDS.channels.alerts, name: 'alerts', type: 0 }] }],
      dm_channels: [],
      users: [],
      messages: [{ id: '42', channel_id: SANDBOX_IDS.channels.alerts, author: { id: '1', username: 'herald', global_name: 'Herald' }, content: '**db-1** <script>x</script>', embeds: [], components: [], timestamp: 't', edits: 0 }],
    });
    const page = byId.get('channels')?.toString() ?? '';
    expect(page).toContain(`<div id="m-42">`);
    expect(page).toContain(`<a href="/channels/${SANDBOX_IDS.guild}/${SANDBOX_IDS.channels.alerts}/42">link</a>`);
    expect(page).toContain('<strong>db-1</strong> <script>x</script>');
    // ...where that <script> is text: the only elements are the page's own.
    const tags = (e: FakeElement): string[] => [e.tag, ...e.children.flatMap((c) => (typeof c === 'string' ? [] : tags(c)))];
    expect(new Set(tags(byId.get('channels') as FakeElement))).toEqual(new Set(['div', 'section', 'h2', 'span', 'a', 'strong']));
    expect(page).toContain('← alerts');
    expect(byId.get('destinations')?.textContent).toContain('alerts → #alerts · deals: not mapped (posts fail)');
    // A Slack mapping is not a channel of this Discord: it says where it is.
    expect(byId.get('destinations')?.textContent).toContain('digest → a Slack channel (C0GENERAL01), not in this sandbox');
    expect(byId.get('destinations')?.textContent).not.toContain('#C0GENERAL01');
  });
});

describe('the sandbox state file', () => {
  it('reloads DM channels with their user, owner-only, and refuses a file that is not its own in plain words', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'herald-sandbox-state-'));
    try {
      const file = path.join(dir, 'sandbox-discord.json');
      const first = new SandboxState({ nonceWindowMs: 60_000, seed: true, file });
      const user = first.users.get(SANDBOX_IDS.user);
      if (user === undefined) throw new Error('the seeded user is missing');
      user.dms_closed = true;
      const dm = first.dmChannel(user);
      const again = new SandboxState({ nonceWindowMs: 60_000, seed: true, file });
      expect(again.channels.get(dm.id)?.recipients?.[0]).toBe(again.users.get(SANDBOX_IDS.user));
      expect(again.users.get(SANDBOX_IDS.user)?.dms_closed).toBe(true);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      await writeFile(file, 'not json');
      expect(() => new SandboxState({ nonceWindowMs: 60_000, seed: true, file })).toThrow(`${file} is not the sandbox's saved world (not JSON); move it aside or delete it to start an empty sandbox`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
