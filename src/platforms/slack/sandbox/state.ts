import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The sandbox's Slack workspace: its users (the bot among them), its conversations (public and
 * private channels, DMs), who is a member of each, and the messages in them. The Web API routes,
 * Socket Mode and the page read and change it. Optionally kept in a JSON file across restarts.
 */

export const SLACK_SANDBOX_IDS = {
  team: 'T0SANDBOX01',
  domain: 'herald-sandbox',
  appId: 'A0HERALD001',
  bot: { user: 'U0HERALDBOT', id: 'B0HERALD001' },
  channels: { general: 'C0GENERAL01', alerts: 'C0ALERTS001' },
  users: { ada: 'U0ADA000001' /* workspace admin */, bob: 'U0BOB000001' },
} as const;

/** A sandbox workspace's ids: its team, its people, its channels and the bot installed in it. */
export interface SlackIds {
  readonly team: string;
  readonly domain: string;
  readonly appId: string;
  readonly bot: { readonly user: string; readonly id: string };
  readonly channels: { readonly general: string; readonly alerts: string };
  readonly users: { readonly ada: string; readonly bob: string };
}

/**
 * The ids of the sandbox's `n`-th workspace (1: SLACK_SANDBOX_IDS), where the same app is installed
 * with a bot of its own, as when a Slack app is installed in a second workspace. `name` names its
 * domain (herald-sandbox-<name>).
 */
export function workspaceIds(n: number, name: string): SlackIds {
  if (n === 1) return SLACK_SANDBOX_IDS;
  const two = String(n).padStart(2, '0');
  const three = String(n).padStart(3, '0');
  return {
    team: `T0SANDBOX${two}`,
    domain: `herald-sandbox-${name}`,
    appId: SLACK_SANDBOX_IDS.appId,
    bot: { user: `U0HERALDB${two}`, id: `B0HERALD${three}` },
    channels: { general: `C0GENERAL${two}`, alerts: `C0ALERTS${three}` },
    users: { ada: `U0ADA${String(n).padStart(6, '0')}`, bob: `U0BOB${String(n).padStart(6, '0')}` },
  };
}

export interface SlackUser {
  id: string;
  name: string;
  real_name: string;
  is_admin: boolean;
  is_bot: boolean;
  /** The bot's bot id (B…), for the bot user only. */
  bot_id?: string;
}

export interface SlackConversation {
  id: string;
  /** Channels only; DMs have none. */
  name?: string;
  kind: 'public' | 'private' | 'im' | 'mpim';
  created: number;
  creator: string;
  members: string[];
  /** The other person of a DM. */
  user?: string;
}

export interface SlackMetadata {
  event_type: string;
  event_payload: Record<string, unknown>;
}

export interface SlackMessage {
  ts: string;
  user: string;
  text: string;
  /** The name the bot posted under (chat.postMessage's `username`). */
  username?: string;
  icon_url?: string;
  /** The bot's bot id, on the bot's messages. */
  bot_id?: string;
  thread_ts?: string;
  metadata?: SlackMetadata;
  edited?: { user: string; ts: string };
  /** Reactions as Slack lists them: the emoji's name, who reacted, how many. */
  reactions?: { name: string; users: string[]; count: number }[];
}

/** What the state file holds. */
interface SavedWorkspace {
  version: 1;
  lastTs: string;
  nextId: number;
  conversations: SlackConversation[];
  messages: Record<string, SlackMessage[]>;
}

function seedUsers(ids: SlackIds): SlackUser[] {
  return [
    { id: ids.bot.user, name: 'herald', real_name: 'Herald', is_admin: false, is_bot: true, bot_id: ids.bot.id },
    { id: ids.users.ada, name: 'ada', real_name: 'Ada Lovelace', is_admin: true, is_bot: false },
    { id: ids.users.bob, name: 'bob', real_name: 'Bob Builder', is_admin: false, is_bot: false },
  ];
}

export class SlackWorkspace {
  readonly users = new Map<string, SlackUser>();
  readonly conversations = new Map<string, SlackConversation>();
  /** Each conversation's messages, oldest first (thread replies included). */
  readonly messages = new Map<string, SlackMessage[]>();
  /** The last ts given, in microseconds: every new ts is later, across all conversations. */
  private lastTs = 0n;
  private nextId = 1;

  constructor(
    private readonly now: () => number,
    private readonly file: string | undefined,
    /** Its ids (SLACK_SANDBOX_IDS unless it is one of the sandbox's other workspaces). */
    readonly ids: SlackIds = SLACK_SANDBOX_IDS,
    /** What follows the type letter of the conversation ids it makes (`0`; `W02` in the second workspace): each workspace's are its own, as Slack's are unique. */
    private readonly idInfix = '0',
  ) {
    for (const u of seedUsers(ids)) this.users.set(u.id, u);
    if (!this.load()) this.seed();
  }

  private seed(): void {
    const { bot, users, channels } = this.ids;
    const created = this.seconds();
    // The bot is in #general from the start; it joins #alerts itself (conversations.join).
    this.add({ id: channels.general, name: 'general', kind: 'public', created, creator: users.ada, members: [users.ada, users.bob, bot.user] });
    this.add({ id: channels.alerts, name: 'alerts', kind: 'public', created, creator: users.ada, members: [users.ada] });
  }

  add(conversation: SlackConversation): SlackConversation {
    this.conversations.set(conversation.id, conversation);
    if (!this.messages.has(conversation.id)) this.messages.set(conversation.id, []);
    return conversation;
  }

  /** A new conversation id: C… for channels, G… for group DMs, D… for DMs (11 characters, as Slack's). */
  newId(prefix: 'C' | 'D' | 'G'): string {
    const id = `${prefix}${this.idInfix}${String(this.nextId).padStart(10 - this.idInfix.length, '0')}`;
    this.nextId += 1;
    return id;
  }

  /** A conversation by id or, for channels, by name (with or without '#'), as chat.postMessage accepts. */
  find(idOrName: string): SlackConversation | undefined {
    const byId = this.conversations.get(idOrName);
    if (byId !== undefined) return byId;
    const name = idOrName.replace(/^#/, '');
    for (const c of this.conversations.values()) if (c.name === name) return c;
    return undefined;
  }

  /** The DM between the bot and these people (one person: a D… DM; more: a G… group DM), opened if new. */
  openDm(people: string[]): SlackConversation {
    const bot = this.ids.bot.user;
    const members = [...new Set([...people, bot])].sort();
    const kind = members.length === 2 ? 'im' : 'mpim';
    for (const c of this.conversations.values()) if (c.kind === kind && c.members.join() === members.join()) return c;
    const other = people[0] ?? bot;
    const dm: SlackConversation = { id: this.newId(kind === 'im' ? 'D' : 'G'), kind, created: this.seconds(), creator: bot, members, ...(kind === 'im' ? { user: other } : { name: `mpdm-${members.map((m) => this.users.get(m)?.name ?? m).join('--')}-1` }) };
    return this.add(dm);
  }

  /** The time now in whole seconds (a conversation's `created`). */
  seconds(): number {
    return Math.floor(this.now() / 1000);
  }

  /** A new ts: "seconds.microseconds", later than every ts given before. */
  nextTs(): string {
    const candidate = BigInt(Math.floor(this.now())) * 1000n;
    this.lastTs = candidate > this.lastTs ? candidate : this.lastTs + 1n;
    return formatTs(this.lastTs);
  }

  /** A message stored at the end of its conversation. */
  append(channel: string, message: SlackMessage): SlackMessage {
    this.messages.get(channel)?.push(message);
    this.save();
    return message;
  }

  /** Take a message out of its conversation (chat.delete), keeping a record for the page and the tests; false: no such message. */
  remove(channel: string, ts: string): boolean {
    const list = this.messages.get(channel);
    const index = list?.findIndex((m) => m.ts === ts) ?? -1;
    if (list === undefined || index < 0) return false;
    list.splice(index, 1);
    this.deleted.push({ channel, ts, at: new Date(this.now()).toISOString() });
    this.save();
    return true;
  }

  /** Messages deleted (chat.delete), oldest first; in memory only. */
  readonly deleted: { channel: string; ts: string; at: string }[] = [];

  message(channel: string, ts: string): SlackMessage | undefined {
    return this.messages.get(channel)?.find((m) => m.ts === ts);
  }

  /** The workspace as the state file last kept it; false when there is no file yet. */
  private load(): boolean {
    if (this.file === undefined) return false;
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    let saved: SavedWorkspace;
    try {
      saved = JSON.parse(text) as SavedWorkspace;
    } catch {
      throw new Error(`${this.file} is not the Slack sandbox's saved workspace (not JSON); move it aside or delete it to start an empty sandbox`);
    }
    if (saved.version !== 1) throw new Error(`${this.file}: unknown Slack sandbox state version; move it aside or delete it to start an empty sandbox`);
    for (const c of saved.conversations) this.add(c);
    for (const [channel, list] of Object.entries(saved.messages)) this.messages.set(channel, list);
    this.lastTs = parseTs(saved.lastTs) ?? 0n;
    this.nextId = saved.nextId;
    return true;
  }

  /** Write the workspace to the state file, if there is one: to a temporary file, then renamed over it (never half written). */
  save(): void {
    if (this.file === undefined) return;
    const saved: SavedWorkspace = { version: 1, lastTs: formatTs(this.lastTs), nextId: this.nextId, conversations: [...this.conversations.values()], messages: Object.fromEntries(this.messages) };
    mkdirSync(path.dirname(this.file), { recursive: true });
    const temp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(temp, JSON.stringify(saved));
    renameSync(temp, this.file);
  }
}

export function formatTs(micros: bigint): string {
  return `${micros / 1_000_000n}.${String(micros % 1_000_000n).padStart(6, '0')}`;
}

/** A ts ("1733112345.000100") as microseconds; undefined when it is not one. */
export function parseTs(ts: string): bigint | undefined {
  const m = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(ts);
  if (m === null) return undefined;
  return BigInt(m[1] ?? '0') * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}
