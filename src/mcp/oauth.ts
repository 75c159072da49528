import { createHash } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import type { Caller } from './policy.js';

/**
 * A caller as authenticated by one bearer token: its client and scopes (what the policy reads), the
 * token itself (by its SHA-256: a session is bound to the very token that opened it, so to its
 * client, subject, scopes and expiry alike), and when it expires.
 */
export interface Principal extends Caller {
  /** SHA-256 of the bearer token, hex: never the token. */
  readonly token: string;
  /** When the token stops being valid (ms since the epoch); undefined for the static token. */
  readonly expiresAt?: number | undefined;
}

/** A bearer token's digest, as a Principal holds it. */
export const tokenDigest = (token: string): string => createHash('sha256').update(token).digest('hex');

/** The scopes Herald's tools take (src/mcp/policy.ts scopeOf): read-only tools, writes, destructive ones. */
export const SCOPES = ['read', 'write', 'admin'] as const;

export interface OAuthSettings {
  /** The authorization server (the tokens' `iss`). */
  issuer: string;
  /** Where it publishes its keys. */
  jwksUrl: string;
  /** This MCP server's canonical URL: the audience a token must name (RFC 8707). */
  resource: string;
}

/**
 * OAuth 2.1 resource server for `herald mcp --http`: access tokens are JWTs signed by the
 * operator's authorization server (its JWKS, fetched and cached by jose), for this resource
 * (`aud`), from that issuer (`iss`), not expired (`exp`, `nbf`), naming its client (`client_id`,
 * else `azp`, else `sub`). Nothing else is trusted: a token that fails any check is no token.
 */
export function oauthVerifier(settings: OAuthSettings): (token: string) => Promise<Principal | undefined> {
  const keys = createRemoteJWKSet(new URL(settings.jwksUrl));
  return async (token) => {
    try {
      const { payload } = await jwtVerify(token, keys, { issuer: settings.issuer, audience: settings.resource, requiredClaims: ['exp'] });
      const raw = payload['scope'] ?? payload['scp'];
      const scopes = new Set(typeof raw === 'string' ? raw.split(' ').filter((s) => s !== '') : Array.isArray(raw) ? raw.filter((s): s is string => typeof s === 'string') : []);
      const client = [payload['client_id'], payload['azp'], payload.sub].find((v): v is string => typeof v === 'string' && v !== '');
      // A token that names no client is no token: without a client it would call the bridge as the
      // connector (no policy header), with the connector's inbox, cursor and upload allowance.
      if (client === undefined) return undefined;
      return { client, scopes, token: tokenDigest(token), ...(typeof payload.exp === 'number' ? { expiresAt: payload.exp * 1000 } : {}) };
    } catch {
      return undefined;
    }
  };
}

/** Protected Resource Metadata (RFC 9728): what a client needs to get a token for this server. */
export function resourceMetadata(settings: OAuthSettings): Record<string, unknown> {
  return {
    resource: settings.resource,
    authorization_servers: [settings.issuer],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Herald MCP server',
  };
}

/** Where the metadata is served for a resource URL: the well-known path with the resource's path after it (RFC 9728 §3.1). */
export function metadataPath(resource: string): string {
  const p = new URL(resource).pathname.replace(/\/$/, '');
  return `/.well-known/oauth-protected-resource${p}`;
}
