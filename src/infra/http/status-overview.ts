import type { Registry } from 'prom-client';

// The top of the status page: what is on (and how to turn on what is off), and each platform
// with who Herald is there and the state of its links, at a glance.

/** A capability the operator turns on with a variable (src/capabilities.ts makes the list). */
export interface CapabilityRow {
  readonly name: string;
  readonly on: boolean;
  readonly detail: string;
}

/** A platform Herald speaks as one identity, who it is there (undefined until known), and what keeps it from speaking. */
export interface PlatformRow {
  readonly platform: string;
  /** The identity's name; `default` when not given. */
  readonly as?: string;
  identity(): string | undefined;
  troubles?(): readonly string[];
}

/** The key of one platform's links as one identity (linkStates). */
export function linkKey(platform: string, as = 'default'): string {
  return `${platform}\u0000${as}`;
}

export const OVERVIEW_STYLE = `table{border-collapse:collapse;margin:.3rem 0}th,td{text-align:left;padding:.2rem .8rem .2rem 0;border-bottom:1px solid #eee}
.off{color:#666}`;

/**
 * Each platform's links now, by platform and identity (linkKey): `gateway up`, `observer down`, or
 * why there is none here. Another identity's link is named `link:identity` (`gateway:ops`).
 */
export async function linkStates(registry: Registry): Promise<Map<string, string>> {
  const read = async (name: string): Promise<{ labels: Record<string, string | number>; value: number }[]> => {
    try {
      return ((await registry.getSingleMetric(name)?.get())?.values ?? []) as { labels: Record<string, string | number>; value: number }[];
    } catch {
      return [];
    }
  };
  const states = new Map<string, string[]>();
  const add = (key: string, state: string): void => void states.set(key, [...(states.get(key) ?? []), state]);
  for (const v of await read('herald_transport_link_up')) {
    const [link = '', as] = String(v.labels['link'] ?? '').split(':');
    add(linkKey(String(v.labels['transport'] ?? ''), as), `${link} ${v.value === 1 ? 'up' : 'down'}`);
  }
  // A link another replica holds has no series here: this process is on standby for it.
  for (const v of await read('herald_singleton_held')) {
    const [transport = '', link = '', as] = String(v.labels['name'] ?? '').split(':');
    const key = linkKey(transport, as);
    if (v.value === 0 && !(states.get(key) ?? []).some((s) => s.startsWith(`${link} `))) add(key, `${link} held by another replica`);
  }
  return new Map([...states].map(([k, v]) => [k, v.join(', ')]));
}

/** The page's two tables (empty when it was given neither). */
export function overview(capabilities: readonly CapabilityRow[], platforms: readonly PlatformRow[], links: ReadonlyMap<string, string>): string {
  const parts: string[] = [];
  if (platforms.length > 0) {
    const rows = platforms.map((p) => {
      const troubles = p.troubles?.() ?? [];
      const state = [links.get(linkKey(p.platform, p.as)) ?? 'no connection of its own (requests only)', ...troubles].join('; ');
      const cls = troubles.length > 0 || /\bdown\b/.test(state) ? 'down' : /\bup\b/.test(state) ? 'up' : 'off';
      return `<tr><td>${escape(p.platform)}</td><td>${escape(p.as ?? 'default')}</td><td>${escape(p.identity() ?? '–')}</td><td class="${cls}">${escape(state)}</td></tr>`;
    });
    parts.push(`<section>\n<h2>platforms</h2>\n<table>\n<thead><tr><th>platform</th><th>speaking as</th><th>bot</th><th>link</th></tr></thead>\n<tbody>\n${rows.join('\n')}\n</tbody>\n</table>\n</section>`);
  }
  if (capabilities.length > 0) {
    const rows = capabilities.map((c) => `<tr><td>${escape(c.name)}</td><td class="${c.on ? 'up' : 'off'}">${c.on ? 'on' : 'off'}</td><td>${escape(c.detail)}</td></tr>`);
    parts.push(`<section>\n<h2>what is on</h2>\n<p>Each is turned on by its variable and a restart.</p>\n<table>\n<thead><tr><th>capability</th><th>state</th><th>how</th></tr></thead>\n<tbody>\n${rows.join('\n')}\n</tbody>\n</table>\n</section>`);
  }
  return parts.join('\n');
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}
