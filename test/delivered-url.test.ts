import { readFileSync } from 'node:fs';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { SPEC_PATH } from '../src/infra/contract/spec.js';
import { createRegistry } from '../src/infra/metrics.js';
import { IrcMetrics, IrcPlatform, type IrcTransportOptions } from '../src/platforms/irc/irc-platform.js';
import { discordMessageUrl } from '../src/platforms/discord/message-links.js';
import { MemoryPlatform } from '../src/platforms/memory/memory-platform.js';
import type { Platform } from '../src/platforms/platform.js';

/** The contract's pattern for a delivered delivery's `url`, as the bundle has it. */
const bundle = JSON.parse(readFileSync(SPEC_PATH, 'utf8')) as { components: { schemas: { DeliveredDelivery: { properties: { url: { pattern: string } } } } } };
// Ajv compiles patterns with the `u` flag: so does this test.
const URL_PATTERN = new RegExp(bundle.components.schemas.DeliveredDelivery.properties.url.pattern, 'u');

/** A message's url as the delivery engine builds it: the platform's own (every platform gives one). */
const urlOf = (t: Platform, scope: string, channelId: string, messageId: string): string => t.messageUrl(scope, channelId, messageId);

function irc(host: string, tls: boolean): IrcPlatform {
  return new IrcPlatform({
    server: { host, port: 6697, tls },
    nick: 'herald',
    channels: [],
    db: undefined as unknown as IrcTransportOptions['db'],
    log: pino({ level: 'silent' }),
    metrics: new IrcMetrics(createRegistry()),
    linesPerSecond: 1,
    echoTimeoutMs: 1_000,
    senderIdleMs: 1_000,
    retention: { maxAgeMs: 1_000, perChannel: 1 },
  });
}

describe("the contract's delivered url", () => {
  it("accepts the url every platform's transport gives for a message it sent", () => {
    const urls = [
      discordMessageUrl('234567890123456789', '345678901234567890', '456789012345678901'),
      discordMessageUrl('@me', '345678901234567890', '456789012345678901'),
      urlOf(new MemoryPlatform({ now: () => new Date() }), '234567890123456789', '345678901234567890', '456789012345678901'),
      urlOf(irc('irc.example.org', false), '234567890123456789', '#alerts', 'AbC-123_x'),
      urlOf(irc('irc.example.org', true), '234567890123456789', '#ops', ''),
      // An `&` channel (local to its server) is a channel too: `%26` (the pattern once took only `%23`).
      urlOf(irc('::1', false), '234567890123456789', '&ops', 'm1'),
      urlOf(irc('127.0.0.1', false), '234567890123456789', '#crème', 'id with space'),
      // A platform that is neither: any absolute URL naming a host and a path.
      'https://matrix.to/#/!ops:example.org/$event?via=example.org',
      'https://chat.example.org:8443/ops/p/17',
    ];
    expect(urls.filter((u) => !URL_PATTERN.test(u))).toEqual([]);
  });

  it('refuses what is no message link: no scheme or host or path, whitespace, script URLs, malformed Discord and IRC links', () => {
    const garbage = [
      '',
      'not a url',
      '/channels/1/2/3',
      '//discord.com/channels/1/2/3',
      'https://',
      'https://example.org',
      'slack://channel?team=T1&id=C2',
      'https://example.org/a b',
      'https://example.org/\u0000',
      'https://exämple.org/a',
      'https://example.org/ä',
      'javascript://example.org/%0aalert(1)',
      'JavaScript://example.org/x',
      'data://example.org/x',
      'vbscript://example.org/x',
      'file://host/etc/passwd',
      // Discord's and IRC's own forms, malformed: no loophole through the generic alternative.
      'https://discord.com/channels/abc/2/3',
      'https://discord.com/channels/1/2',
      'https://discord.com/channels/1/2/3 ',
      'irc://irc.example.org:6667/alerts?msgid=1',
      'irc://irc.example.org:6667/%23alerts',
      'ircs://irc.example.org/%23alerts?msgid=',
    ];
    expect(garbage.filter((u) => URL_PATTERN.test(u))).toEqual([]);
  });
});
