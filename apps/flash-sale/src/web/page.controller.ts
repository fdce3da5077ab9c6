import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Controller, Get, Header, Param, Res } from '@nestjs/common';
import { notFound } from '../common/app-exception.js';

interface Asset {
  readonly type: string;
  readonly body: string;
}

// Read once, next to this module (the build copies public/ along).
const readAsset = (file: string, type: string): Asset => ({
  type,
  body: readFileSync(new URL(`./public/${file}`, import.meta.url), 'utf8'),
});

/**
 * A file of the uPlot package (the charts), served by the app itself so that
 * the page works offline: read from node_modules, where npm put it.
 */
const readChartAsset = (file: string, type: string): Asset => {
  const packageJson = createRequire(import.meta.url).resolve(
    'uplot/package.json',
  );
  return {
    type,
    body: readFileSync(
      path.join(path.dirname(packageJson), 'dist', file),
      'utf8',
    ),
  };
};

const PAGE = readAsset('index.html', 'text/html; charset=utf-8');
const ASSETS = new Map<string, Asset>([
  ['app.js', readAsset('app.js', 'text/javascript; charset=utf-8')],
  ['charts.js', readAsset('charts.js', 'text/javascript; charset=utf-8')],
  ['dashboard.js', readAsset('dashboard.js', 'text/javascript; charset=utf-8')],
  ['dashboard.css', readAsset('dashboard.css', 'text/css; charset=utf-8')],
  ['app.css', readAsset('app.css', 'text/css; charset=utf-8')],
  ['shop.css', readAsset('shop.css', 'text/css; charset=utf-8')],
  [
    'uplot.js',
    readChartAsset('uPlot.iife.min.js', 'text/javascript; charset=utf-8'),
  ],
  ['uplot.css', readChartAsset('uPlot.min.css', 'text/css; charset=utf-8')],
]);

/** Everything the page loads comes from this app; nothing inline, nothing from elsewhere. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Reply {
  setHeader(name: string, value: string): unknown;
}

/** `GET /`: the page to watch the sale; `GET /assets/<file>`: its scripts and styles (uPlot's included). */
@Controller()
export class PageController {
  @Get()
  @Header('Content-Type', PAGE.type)
  @Header('Cache-Control', 'no-cache')
  @Header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
  @Header('X-Content-Type-Options', 'nosniff')
  page(): string {
    return PAGE.body;
  }

  @Get('assets/:file')
  @Header('Cache-Control', 'no-cache')
  @Header('X-Content-Type-Options', 'nosniff')
  asset(
    @Param('file') file: string,
    @Res({ passthrough: true }) reply: Reply,
  ): string {
    const asset = ASSETS.get(file);
    if (!asset) throw notFound(`No asset ${file}`);
    reply.setHeader('Content-Type', asset.type);
    return asset.body;
  }
}
