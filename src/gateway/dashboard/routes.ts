/**
 * The dashboard's HTTP paths: the page at `/`, its script, uPlot (served from node_modules,
 * nothing is fetched from elsewhere) and the event stream. The page and its script hold no
 * data, so they are open; the stream shows every replica's state, so it needs what
 * `/router/replicas` needs (the admin key once keys are configured). The page sends the key
 * from the URL's fragment (`/#key=KEY`, never sent to a server or written to a log).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { DashboardFeed } from './feed.ts';

export const DASHBOARD_EVENTS_PATH = '/dashboard/events';

interface DashboardRoute {
  method: 'GET';
  handle(req: IncomingMessage, res: ServerResponse): void;
}

interface StaticFile {
  path: string;
  contentType: string;
  bytes: Buffer;
}

let files: StaticFile[] | null = null;

/** Read once per process, on first use. */
function staticFiles(): StaticFile[] {
  if (files !== null) return files;
  const here = (name: string) => readFileSync(new URL(name, import.meta.url));
  const uplot = (name: string) =>
    readFileSync(createRequire(import.meta.url).resolve(`uplot/dist/${name}`));
  files = [
    { path: '/', contentType: 'text/html; charset=utf-8', bytes: here('index.html') },
    {
      path: '/dashboard/app.js',
      contentType: 'text/javascript; charset=utf-8',
      bytes: here('app.js'),
    },
    {
      path: '/dashboard/uPlot.iife.min.js',
      contentType: 'text/javascript; charset=utf-8',
      bytes: uplot('uPlot.iife.min.js'),
    },
    {
      path: '/dashboard/uPlot.min.css',
      contentType: 'text/css; charset=utf-8',
      bytes: uplot('uPlot.min.css'),
    },
  ];
  return files;
}

/**
 * The dashboard's routes, to merge into the gateway's table. `authorize` throws (401/403) when
 * the request may not read the fleet's state.
 */
export function dashboardRoutes(
  feed: DashboardFeed,
  authorize: (authorization: string | undefined) => void,
): Record<string, DashboardRoute> {
  const routes: Record<string, DashboardRoute> = {};
  for (const file of staticFiles()) {
    routes[file.path] = {
      method: 'GET',
      handle: (_req, res) => {
        res.writeHead(200, {
          'content-type': file.contentType,
          'content-length': file.bytes.length,
          'cache-control': 'no-cache',
        });
        res.end(file.bytes);
      },
    };
  }
  routes[DASHBOARD_EVENTS_PATH] = {
    method: 'GET',
    handle: (req, res) => {
      authorize(req.headers.authorization);
      feed.subscribe(res);
    },
  };
  return routes;
}
