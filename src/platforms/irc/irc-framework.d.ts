/**
 * The part of irc-framework (4.14) Herald uses: it ships no types. Herald reads every line in the
 * raw middleware (labels, batches, tags are there before the library buffers or drops them), so
 * little of its parsed-event surface is declared.
 */
declare module 'irc-framework' {
  import { EventEmitter } from 'node:events';

  /** One parsed IRC line. Tag keys are lowercased by the parser. */
  export interface IrcLine {
    command: string;
    params: string[];
    tags: Record<string, string | true>;
    prefix: string;
    nick: string;
    ident: string;
    hostname: string;
  }

  export interface ConnectOptions {
    host: string;
    port: number;
    nick: string;
    username?: string;
    gecos?: string;
    tls?: boolean;
    rejectUnauthorized?: boolean;
    password?: string;
    account?: { account: string; password: string };
    sasl_mechanism?: string;
    enable_echomessage?: boolean;
    auto_reconnect?: boolean;
    auto_reconnect_max_retries?: number;
    message_max_length?: number;
    ping_interval?: number;
    ping_timeout?: number;
    version?: string | null;
  }

  type Next = (err?: unknown) => void;
  export type RawMiddleware = (command: string, line: IrcLine, raw: string, client: Client, next: Next) => void;

  export class Message {
    constructor(command: string, ...params: string[]);
    tags: Record<string, string>;
  }

  export class Client extends EventEmitter {
    constructor(options?: Partial<ConnectOptions>);
    connect(options: ConnectOptions): void;
    requestCap(cap: string | string[]): void;
    use(fn: (client: Client, raw: { use(m: RawMiddleware): void }, parsed: unknown) => void): this;
    raw(line: Message | string | string[], ...args: string[]): void;
    quit(message?: string): void;
    changeNick(nick: string): void;
    readonly connected: boolean;
    readonly connection: { end(): void; connected: boolean };
    readonly user: { nick: string };
    readonly network: {
      cap: { enabled: string[]; isEnabled(cap: string): boolean };
      supports(feature: string): string | boolean;
    };
  }
}
