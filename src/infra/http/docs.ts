import { readFile } from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import { createRequire } from 'node:module';

/** Swagger UI's files, served from the swagger-ui-dist package: nothing is loaded from a CDN. */
const ASSETS: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Herald API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// Tokens typed into Authorize live only as long as the page: never in localStorage, where any
// script of this origin could read them. A token an earlier Herald let Swagger UI save is forgotten.
// No online validator badge: nothing leaves for another origin.
const INIT = `try { window.localStorage.removeItem('authorized'); } catch (e) {}
window.ui = SwaggerUIBundle({
  url: '/openapi.yaml',
  dom_id: '#swagger-ui',
  deepLinking: true,
  persistAuthorization: false,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout'
});
`;

/**
 * The one inline style Swagger UI renders: the `<style>` inside its top bar's logo (swagger-ui-dist
 * 5.35.0). A new version with another logo shows it uncoloured, and test/docs-ui.test.ts says so.
 */
const LOGO_STYLE = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='";

/**
 * Swagger UI runs from this origin only (its scripts and styles from swagger-ui-dist, its icons as
 * data: images, "Try it out" against this API) and is never framed.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  `style-src 'self' ${LOGO_STYLE}`,
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
const HEADERS = { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

/** `/docs` (Swagger UI) and `/openapi.yaml` (the contract served: generated/openapi.yaml, with the started modules' own documents). */
export function docsRouter(contractYaml: () => string): Router {
  const router = new Router();
  // The package's folder, found without loading it: its main module evaluates Swagger UI's 1.4 MB
  // browser bundle into this process's heap, which only a browser ever runs.
  const root = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  router.get('/openapi.yaml', (ctx) => {
    ctx.set(HEADERS);
    ctx.type = 'application/yaml; charset=utf-8';
    ctx.body = contractYaml();
  });
  router.get('/docs', (ctx) => {
    ctx.set(HEADERS);
    ctx.type = 'html';
    ctx.body = PAGE;
  });
  router.get('/docs/init.js', (ctx) => {
    ctx.set(HEADERS);
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.body = INIT;
  });
  router.get('/docs/:file', async (ctx) => {
    const file = ctx.params['file'] ?? '';
    const type = ASSETS[file];
    if (type === undefined) return;
    ctx.set(HEADERS);
    ctx.type = type;
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = await readFile(path.join(root, file));
  });
  return router;
}
