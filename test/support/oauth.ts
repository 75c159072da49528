import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

/** A local OAuth authorization server for tests: its JWKS, and the access tokens it signs. */
export interface LocalIssuer {
  url: string;
  server: HttpServer;
  /** A signed access token with these claims (expiring in 5 minutes unless `expiresIn` says otherwise). */
  sign(claims: Record<string, unknown>, o?: { key?: CryptoKey; expiresIn?: string | number }): Promise<string>;
  /** A key the issuer does not publish: a token it signs is forged. */
  other: CryptoKey;
  close(): Promise<void>;
}

export async function localIssuer(): Promise<LocalIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const other = (await generateKeyPair('RS256')).privateKey;
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const server = createServer((req, res) => {
    if (req.url === '/.well-known/jwks.json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    other,
    sign: (claims, o = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(url)
        .setIssuedAt()
        .setExpirationTime(o.expiresIn ?? '5m')
        .sign(o.key ?? privateKey),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
