import type { Mentions, OutgoingMessage } from '../platform.js';

/** A Block Kit block, as far as Herald builds and reads them. */
export interface Block {
  type: string;
  block_id?: string;
  [field: string]: unknown;
}

/** The block ids of a message's parts: an edit replaces a part by its id and keeps the others. */
export const PART_BLOCK = { content: 'herald-content', card: 'herald-card', links: 'herald-links' } as const;

/**
 * Text as Slack shows it, inert: `&`, `<` and `>` escaped, so `<!channel>`, `<!here>`, `<@U…>` and
 * `<#C…>` written in it are shown, never acted on (with `parse: none` and `link_names: false`, a
 * plain `@channel` is not one either). Only the users `mentions` names are left as mentions.
 */
export function inert(text: string, mentions?: Mentions): string {
  let out = text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  for (const user of mentions?.users ?? []) {
    if (!/^[UW][A-Z0-9]{2,}$/.test(user)) continue;
    out = out.split(`&lt;@${user}&gt;`).join(`<@${user}>`);
    if (!out.includes(`<@${user}>`)) out = `<@${user}> ${out}`;
  }
  return out;
}

/** A URL inside `<url|label>`: `|` and `>` would end it early. */
function linkUrl(url: string): string {
  return url.replace(/\|/g, '%7C').replace(/>/g, '%3E').replace(/</g, '%3C');
}

/** The blocks of each part `message` includes (a part it leaves out has none). */
export function partBlocks(message: OutgoingMessage, mentions?: Mentions): Block[] {
  const blocks: Block[] = [];
  if (message.content !== undefined && message.content !== '') {
    blocks.push({ type: 'section', block_id: PART_BLOCK.content, text: { type: 'mrkdwn', text: inert(message.content, mentions), verbatim: true } });
  }
  const card = message.card;
  if (card !== undefined) {
    const lines: string[] = [];
    if (card.title !== undefined) lines.push(card.url !== undefined ? `*<${linkUrl(card.url)}|${inert(card.title)}>*` : `*${inert(card.title)}*`);
    if (card.description !== undefined) lines.push(inert(card.description));
    for (const f of card.fields ?? []) lines.push(`*${inert(f.name)}*\n${inert(f.value)}`);
    if (card.footer !== undefined) lines.push(`_${inert(card.footer)}_`);
    if (lines.length > 0) blocks.push({ type: 'section', block_id: PART_BLOCK.card, text: { type: 'mrkdwn', text: lines.join('\n'), verbatim: true } });
  }
  if (message.links !== undefined && message.links.length > 0) {
    blocks.push({
      type: 'actions',
      block_id: PART_BLOCK.links,
      elements: message.links.map((l, i) => ({ type: 'button', action_id: `herald-link-${i}`, text: { type: 'plain_text', text: l.label.slice(0, 75), emoji: false }, url: l.url })),
    });
  }
  return blocks;
}

/**
 * The message's text (what notifications, search and clients without blocks show): its content,
 * then its card and its links as text, each part on its own lines.
 */
export function textOf(blocks: readonly Block[]): string {
  const parts: string[] = [];
  for (const b of blocks) {
    const text = (b['text'] as { text?: unknown } | undefined)?.text;
    if (typeof text === 'string') parts.push(text);
    if (b.type === 'actions') {
      const links = ((b['elements'] as { text?: { text?: string }; url?: string }[] | undefined) ?? []).filter((e) => typeof e.url === 'string').map((e) => `<${linkUrl(e.url ?? '')}|${inert(e.text?.text ?? e.url ?? '')}>`);
      if (links.length > 0) parts.push(links.join(' · '));
    }
  }
  return parts.join('\n\n');
}

/** What chat.postMessage is given for a message: text (never empty) and blocks. */
export function rendered(message: OutgoingMessage, mentions?: Mentions): { text: string; blocks: Block[] } {
  const blocks = partBlocks(message, mentions);
  return { text: textOf(blocks), blocks };
}

/**
 * An edit: the parts `message` includes replace those of `current` (the message's blocks as Slack
 * has them), the others are kept; an empty content removes the content.
 */
export function edited(current: readonly Block[] | undefined, message: OutgoingMessage): { text: string; blocks: Block[] } {
  const given = partBlocks(message);
  const replaced = new Set<string>();
  if (message.content !== undefined) replaced.add(PART_BLOCK.content);
  if (message.card !== undefined) replaced.add(PART_BLOCK.card);
  if (message.links !== undefined) replaced.add(PART_BLOCK.links);
  const order = [PART_BLOCK.content, PART_BLOCK.card, PART_BLOCK.links] as const;
  const blocks: Block[] = [];
  for (const id of order) {
    const block = replaced.has(id) ? given.find((b) => b.block_id === id) : current?.find((b) => b.block_id === id);
    if (block !== undefined) blocks.push(block);
  }
  return { text: textOf(blocks), blocks };
}
