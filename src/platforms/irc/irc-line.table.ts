import type { Generated, Selectable } from 'kysely';

/** A line the observer read in a channel (live, its own echo, or replayed on JOIN). */
export interface IrcLineTable {
  id: Generated<string>;
  /** Lower case, with its `#`. */
  channel: string;
  nick: string;
  text: string;
  /** server-time, when the server sent it. */
  at: Date;
  /** The server's msgid: a line is stored once however many observers (or replays) saw it. */
  msgid: string | null;
  /** `+herald/delivery`: which send (and part) of Herald's wrote it. */
  delivery_tag: string | null;
}

/** A channel created through Herald: every observer joins it, after a restart too. */
export interface IrcChannelTable {
  channel: string;
  created_at: Date;
}

export type IrcLineRow = Selectable<IrcLineTable>;

/** This part's tables, as it sees the store (the whole schema is src/schema.ts, at the wiring). */
export interface IrcDb {
  irc_lines: IrcLineTable;
  irc_channels: IrcChannelTable;
}
