import { randomBytes } from 'node:crypto';
import type { IrcLine } from 'irc-framework';
import { TransportError } from '../platform.js';

/** Numerics that refuse a PRIVMSG: no such nick/channel, cannot send to channel, no recipient, no text. */
const SEND_REFUSALS = new Set(['401', '403', '404', '411', '412']);

interface Waiter {
  resolve: (line: IrcLine | undefined) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * The lines a connection sent under a label (labeled-response), each waiting for the server's
 * answer to it: the echo (echo-message) proves the server took the line and gives its msgid and
 * time; an ACK or a batch says it took it without an echo; a refusal numeric or FAIL says it did not.
 */
export class LabeledLines {
  private readonly waiting = new Map<string, Waiter>();

  constructor(private readonly echoTimeoutMs: number) {}

  /**
   * Write a line under a fresh label (`write` puts the label on it and sends it), and resolve with
   * its echo, or undefined when the server took it without one. Rejects when the server refused it,
   * and as "may have been created" when no answer came in time or `signal` aborted the wait.
   */
  confirm(write: (label: string) => void, signal: AbortSignal): Promise<IrcLine | undefined> {
    const label = randomBytes(6).toString('base64url');
    return new Promise<IrcLine | undefined>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(label);
        // The line went out and no echo came: it may have been taken.
        reject(new TransportError({ kind: 'transient', detail: 'no labeled echo from the IRC server in time', mayHaveCreated: true }));
      }, this.echoTimeoutMs);
      const onAbort = (): void => {
        clearTimeout(timer);
        this.waiting.delete(label);
        reject(new TransportError({ kind: 'transient', detail: 'aborted while waiting for the echo', mayHaveCreated: true }));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(label, {
        resolve: (l) => (signal.removeEventListener('abort', onAbort), resolve(l)),
        reject: (e) => (signal.removeEventListener('abort', onAbort), reject(e)),
        timer,
      });
      write(label);
    });
  }

  /** Settle the wait a line's label belongs to, when the line answers it. */
  read(command: string, line: IrcLine): void {
    const label = typeof line.tags['label'] === 'string' ? line.tags['label'] : undefined;
    if (label === undefined) return;
    if (command === 'PRIVMSG' || command === 'ACK' || command === 'BATCH') this.take(label)?.resolve(command === 'PRIVMSG' ? line : undefined);
    else if (SEND_REFUSALS.has(command) || command === 'FAIL') {
      this.take(label)?.reject(new TransportError({ kind: 'rejected', detail: `the IRC server refused the line (${command} ${line.params.at(-1) ?? ''})` }));
    }
  }

  /** The link dropped: every line still waiting may have been taken, and will get no answer now. */
  dropAll(): void {
    for (const label of [...this.waiting.keys()]) {
      this.take(label)?.reject(new TransportError({ kind: 'transient', detail: 'the IRC link dropped before the echo', mayHaveCreated: true }));
    }
  }

  /** The wait of `label`, no longer waiting (its timer stopped), if there was one. */
  private take(label: string): Waiter | undefined {
    const waiter = this.waiting.get(label);
    if (waiter === undefined) return undefined;
    this.waiting.delete(label);
    clearTimeout(waiter.timer);
    return waiter;
  }
}
