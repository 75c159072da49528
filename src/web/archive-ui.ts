import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';

/** The project's root: src/web/ in development, dist/src/web/ when compiled. */
const ROOT = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return here.includes(`${path.sep}dist${path.sep}`) ? path.resolve(here, '../../..') : path.resolve(here, '../..');
})();
/** Built by `npm run build:web` (esbuild) from src/web/archive/: no CDN, nothing fetched at run time. */
export const ARCHIVE_BUNDLE = path.join(ROOT, 'dist', 'web', 'archive.js');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Herald · media archive</title>
<link rel="icon" type="image/svg+xml" href="/ui/archive/favicon.svg">
<link rel="stylesheet" href="/ui/archive/archive.css">
</head>
<body>
<div id="app"><noscript>The media archive needs JavaScript.</noscript></div>
<script type="module" src="/ui/archive/archive.js"></script>
</body>
</html>
`;

/**
 * The page loads only from Herald: images and media only from Herald itself (the favicon) or as
 * `blob:` URLs of files Herald stored and served to it. An archived item's original URL is never
 * fetched by the operator's browser: it could point anywhere (a private address, Herald itself)
 * and would tell its owner who looked.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob:",
  "media-src 'self' blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The operator web UI of the media archive: a static page and its bundle, which hold no data. The
 * page asks for the admin token and calls the admin API with it (the same MediaService as the
 * MCP tools), so serving the page itself needs no token.
 */
export function archiveUiRoutes(): Router {
  const router = new Router();
  const headers = {
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'content-security-policy': CSP,
  };
  router.get('/ui/archive', (ctx) => {
    ctx.set({ ...headers, 'content-type': 'text/html; charset=utf-8' });
    ctx.body = PAGE;
  });
  router.get('/ui/archive/archive.js', async (ctx) => {
    ctx.set({ ...headers, 'content-type': 'text/javascript; charset=utf-8' });
    ctx.body = await readFile(ARCHIVE_BUNDLE, 'utf8').catch(() => 'document.getElementById("app").textContent = "The UI is not built: run npm run build:web.";');
  });
  router.get('/ui/archive/archive.css', async (ctx) => {
    ctx.set({ ...headers, 'content-type': 'text/css; charset=utf-8' });
    ctx.body = await readFile(path.join(ROOT, 'src', 'web', 'archive', 'archive.css'), 'utf8').catch(() => '');
  });
  // Herald's own icon (no CDN, and no request to /favicon.ico that would answer 404).
  router.get('/ui/archive/favicon.svg', async (ctx) => {
    const icon = await readFile(path.join(ROOT, 'src', 'web', 'archive', 'favicon.svg'), 'utf8').catch(() => undefined);
    if (icon === undefined) return;
    ctx.set({ ...headers, 'content-type': 'image/svg+xml', 'cache-control': 'public, max-age=86400' });
    ctx.body = icon;
  });
  return router;
}
