import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { capabilities, capabilityLines } from '../src/capabilities.js';
import { loadConfig } from '../src/config.js';
import { serveMetrics } from '../src/infra/http/metrics-server.js';
import { createLogger } from '../src/infra/log.js';
import { linkKey, overview } from '../src/infra/http/status-overview.js';
import { newToken } from './support/herald.js';

// The status page is served without a token (on the metrics port) and the banner is printed to a
// terminal: what a platform or the environment puts in them must be shown as text, never a secret.
describe('what is on, and who Herald is, as a hostile platform or a careless environment fills them', () => {
  it('shows a platform identity and link state as text, never markup', () => {
    const hostile = '<img src=x onerror=alert(1)>"\'&';
    const html = overview(
      [{ name: '<b>x</b>', on: true, detail: '<script>alert(1)</script>' }],
      [{ platform: 'slack<svg>', as: '<u>ops</u>', identity: () => hostile, troubles: () => ['token: <s>rejected</s>'] }],
      new Map([[linkKey('slack<svg>', '<u>ops</u>'), '<i>gateway</i> up']]),
    );
    expect(html).not.toMatch(/<img|<script|<svg|<b>|<i>|<u>|<s>/);
    expect(html).toContain('&lt;u&gt;ops&lt;/u&gt;');
    expect(html).toContain('token: &lt;s&gt;rejected&lt;/s&gt;');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
    expect(html).toContain('&lt;i&gt;gateway&lt;/i&gt; up');
  });

  it('names the variables that turned a capability on, never their values (a webhook’s secret or URL, an IRC password)', () => {
    const secrets = ['hook-path-7c1d', 'irc-pass-0f9e', 'hook-secret-55aa-0123456789abcdef0123456789abcdef'];
    const config = loadConfig({
      MCP_BRIDGE_TOKEN: newToken(),
      DISCORD_TOKEN: 'discord-token-not-shown',
      HERALD_IRC_URL: 'irc://irc.example:6697',
      HERALD_IRC_CHANNELS: '#agents',
      HERALD_INBOX_WEBHOOK_URL: `https://hooks.example/${secrets[0]}`,
      HERALD_INBOX_WEBHOOK_SECRET: secrets[2] ?? '',
      HERALD_IRC_PASSWORD: secrets[1] ?? '',
      HERALD_COMMAND_EXECUTION_ENABLED: 'true',
    });
    const list = capabilities(config);
    expect(list.filter((c) => c.on).map((c) => c.name)).toEqual(expect.arrayContaining(['IRC', 'inbox webhook', 'command execution']));
    const shown = [...capabilityLines(list), overview(list, [], new Map())].join('\n');
    for (const secret of [...secrets, 'discord-token-not-shown', 'hooks.example']) expect(shown).not.toContain(secret);
  });

  it('answers an unauthenticated stranger on the metrics port only by GET, reflecting nothing it sent', async () => {
    const hostile = '<img src=x onerror=alert(1)>';
    const metrics = await serveMetrics(new Registry(), '127.0.0.1', 0, createLogger('silent'), { platforms: [{ platform: 'discord', identity: () => hostile }] });
    try {
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
        const res = await fetch(`${metrics.url}/`, { method, body: 'x' });
        expect(res.status, method).toBe(405);
        expect(res.headers.get('allow')).toBe('GET, HEAD');
      }
      const missing = await fetch(`${metrics.url}/${encodeURIComponent(hostile)}?q=${encodeURIComponent(hostile)}`);
      expect(missing.status).toBe(404);
      expect(await missing.text()).toBe('not found: /metrics or /\n');
      const page = await fetch(`${metrics.url}/?refresh=${encodeURIComponent(hostile)}`, { headers: { host: `"><script>alert(1)</script>` } });
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      const html = await page.text();
      expect(html).not.toMatch(/<script|<img/);
      expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    } finally {
      await metrics.close();
    }
  });
});
