/** Where the IRC server is, from `HERALD_IRC_URL` (`irc://host:port` or `ircs://host:port`). */
export interface IrcServer {
  host: string;
  port: number;
  /** ircs://: TLS, certificate verified against the host name. */
  tls: boolean;
}

/** `irc://host[:6667]` or `ircs://host[:6697]`; anything else is undefined. */
export function parseIrcUrl(url: string): IrcServer | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if ((u.protocol !== 'irc:' && u.protocol !== 'ircs:') || u.hostname === '' || u.pathname.replace(/^\/+/, '') !== '') return undefined;
  const tls = u.protocol === 'ircs:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? (tls ? 6697 : 6667) : Number(u.port), tls };
}
