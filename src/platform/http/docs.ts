import { readFile } from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import { getAbsoluteFSPath } from 'swagger-ui-dist';
import { loadSpecYaml } from '../contract/spec.js';

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

const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.yaml',
  dom_id: '#swagger-ui',
  deepLinking: true,
  persistAuthorization: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout'
});
`;

/** `/docs` (Swagger UI) and `/openapi.yaml` (the bundled contract, generated/openapi.yaml). */
export function docsRouter(): Router {
  const router = new Router();
  const root = getAbsoluteFSPath();
  router.get('/openapi.yaml', (ctx) => {
    ctx.type = 'application/yaml; charset=utf-8';
    ctx.body = loadSpecYaml();
  });
  router.get('/docs', (ctx) => {
    ctx.type = 'html';
    ctx.body = PAGE;
  });
  router.get('/docs/init.js', (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.body = INIT;
  });
  router.get('/docs/:file', async (ctx) => {
    const file = ctx.params['file'] ?? '';
    const type = ASSETS[file];
    if (type === undefined) return;
    ctx.type = type;
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = await readFile(path.join(root, file));
  });
  return router;
}
