import { describe, expect, it } from 'vitest';
import { edited, inert, rendered } from '../src/platforms/slack/slack-render.js';

/** How a message looks on Slack: mention-inert text, and each part as its own block an edit can replace. */
describe('Slack message rendering', () => {
  it('shows broadcasts, mentions and links written in the text, but acts on none of them', () => {
    expect(inert('<!channel> <!here> <@U0BOB000001> <#C0GENERAL01> <https://x.example|y> a & b')).toBe('&lt;!channel&gt; &lt;!here&gt; &lt;@U0BOB000001&gt; &lt;#C0GENERAL01&gt; &lt;https://x.example|y&gt; a &amp; b');
  });

  it('leaves only the users a send may notify as mentions, adding one the text lacks', () => {
    expect(inert('hi <@U0BOB000001> and <@U0ADA000001>', { users: ['U0BOB000001'] })).toBe('hi <@U0BOB000001> and &lt;@U0ADA000001&gt;');
    expect(inert('take this', { users: ['U0BOB000001'] })).toBe('<@U0BOB000001> take this');
    // Not a Slack user id: never turned into anything.
    expect(inert('x', { users: ['<!channel>'] })).toBe('x');
  });

  it('renders content, card and links as blocks, and their text for notifications', () => {
    const { text, blocks } = rendered({
      content: 'Deploy done',
      card: { title: 'v1.2', url: 'https://ci.example/1', description: 'all green', fields: [{ name: 'env', value: 'prod' }], footer: 'ci' },
      links: [{ label: 'Logs', url: 'https://ci.example/1/logs' }],
    });
    expect(blocks.map((b) => b.block_id)).toEqual(['herald-content', 'herald-card', 'herald-links']);
    expect(text).toBe('Deploy done\n\n*<https://ci.example/1|v1.2>*\nall green\n*env*\nprod\n_ci_\n\n<https://ci.example/1/logs|Logs>');
  });

  it('an edit replaces the parts it includes and keeps the others', () => {
    const before = rendered({ content: 'old', links: [{ label: 'Logs', url: 'https://ci.example/logs' }] }).blocks;
    const after = edited(before, { content: 'new' });
    expect(after.text).toBe('new\n\n<https://ci.example/logs|Logs>');
    expect(edited(before, { links: [] }).text).toBe('old');
  });
});
