import { ButtonStyle, ComponentType, type APIActionRowComponent, type APIButtonComponentWithURL, type APIEmbed, type RESTPostAPIChannelMessageJSONBody, type RawFile } from 'discord.js';
import type { OutgoingFile, OutgoingMessage } from '../platform.js';

// A message as Discord takes it and shows it: the body Herald sends, its files, its nonce on the
// way out, and the fingerprint that compares what Herald sent with what Discord lists.

export function toDiscordMessage(message: OutgoingMessage): Pick<RESTPostAPIChannelMessageJSONBody, 'content' | 'embeds' | 'components'> {
  const out: Pick<RESTPostAPIChannelMessageJSONBody, 'content' | 'embeds' | 'components'> = {};
  if (message.content !== undefined) out.content = message.content;
  if (message.card !== undefined) {
    const c = message.card;
    const embed: APIEmbed = {};
    if (c.title !== undefined) embed.title = c.title;
    if (c.description !== undefined) embed.description = c.description;
    if (c.url !== undefined) embed.url = c.url;
    if (c.color !== undefined) embed.color = c.color;
    if (c.footer !== undefined) embed.footer = { text: c.footer };
    if (c.fields !== undefined) embed.fields = c.fields.map((f) => ({ name: f.name, value: f.value, ...(f.inline !== undefined ? { inline: f.inline } : {}) }));
    out.embeds = [embed];
  }
  if (message.links !== undefined && message.links.length > 0) {
    const row: APIActionRowComponent<APIButtonComponentWithURL> = {
      type: ComponentType.ActionRow,
      components: message.links.map((l) => ({ type: ComponentType.Button, style: ButtonStyle.Link, label: l.label, url: l.url })),
    };
    out.components = [row];
  }
  return out;
}

/** What a message shows, comparable between what Herald sent and what Discord lists. */
export function fingerprintOf(content: string, embeds: readonly APIEmbed[], components: readonly unknown[], filenames: readonly string[] = []): string {
  const embed = embeds[0];
  const buttons: string[] = [];
  for (const row of components as { components?: { label?: string; url?: string }[] }[]) {
    for (const b of row.components ?? []) buttons.push(`${b.label ?? ''}\u0000${b.url ?? ''}`);
  }
  return JSON.stringify([
    content,
    embed === undefined ? null : [embed.title ?? null, embed.description ?? null, embed.url ?? null, embed.color ?? null, embed.footer?.text ?? null, (embed.fields ?? []).map((f) => [f.name, f.value, f.inline ?? false])],
    buttons,
    // A message with files is told apart by their names too (left out without files: the same fingerprint as before).
    ...(filenames.length > 0 ? [filenames] : []),
  ]);
}

/** Discord's limits for files: 10 MiB a file since January 2025 (more on boosted servers), 10 files and 25 MiB a message. */
export const DISCORD_MAX_FILE_BYTES = 10 * 1024 * 1024;
export const DISCORD_MAX_FILES = 10;
export const DISCORD_MAX_REQUEST_BYTES = 25 * 1024 * 1024;

/**
 * A create's files, as discord.js sends them: multipart with the JSON in `payload_json` and each
 * file as `files[n]`, described in the body's `attachments` by the same index.
 * https://discord.com/developers/docs/reference#uploading-files
 */
export function withFiles(body: RESTPostAPIChannelMessageJSONBody, files: readonly OutgoingFile[] | undefined): { files?: RawFile[] } {
  if (files === undefined || files.length === 0) return {};
  body.attachments = files.map((f, i) => ({ id: i, filename: f.filename, ...(f.description !== undefined ? { description: f.description } : {}) }));
  return { files: files.map((f, i) => ({ key: `files[${i}]`, name: f.filename, data: f.data, contentType: f.contentType })) };
}

/** The nonce of a create as it leaves: in the JSON body, or in a multipart body's `payload_json`. */
export function nonceOf(body: unknown): string | undefined {
  let json: unknown;
  try {
    if (typeof body === 'string') json = JSON.parse(body);
    // discord.js's FormData (undici's own class, not necessarily the global one): read by its interface.
    else if (typeof body === 'object' && body !== null && typeof (body as { get?: unknown }).get === 'function') {
      const payload = (body as { get(name: string): unknown }).get('payload_json');
      json = typeof payload === 'string' ? JSON.parse(payload) : undefined;
    }
  } catch {
    return undefined;
  }
  const nonce = typeof json === 'object' && json !== null ? (json as { nonce?: unknown }).nonce : undefined;
  return typeof nonce === 'string' ? nonce : undefined;
}
