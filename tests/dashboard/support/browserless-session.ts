/**
 * A browser's part of an HTTP conversation, without a browser: cookies kept between requests,
 * the Origin a browser sends with a form POST, and the CSRF token read from the page's form.
 */
export interface Session {
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  /** POSTs form fields with this session's cookies and the given Origin (default: the dashboard's own). */
  post(
    path: string,
    fields: Record<string, string>,
    options?: { readonly origin?: string | null; readonly headers?: Record<string, string> },
  ): Promise<Response>;
  /** The CSRF token in the form of the page at `path`. */
  csrfFrom(path: string): Promise<string>;
  readonly cookies: Map<string, string>;
}

export const ORIGIN = 'http://127.0.0.1:4780';

export function session(fetch: (request: Request) => Response | Promise<Response>): Session {
  const cookies = new Map<string, string>();
  const send = async (path: string, init: RequestInit & { headers: Record<string, string> }): Promise<Response> => {
    const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const response = await fetch(
      new Request(`${ORIGIN}${path}`, {
        ...init,
        redirect: 'manual',
        headers: { host: new URL(ORIGIN).host, ...(cookie ? { cookie } : {}), ...init.headers },
      }),
    );
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return response;
  };
  const self: Session = {
    cookies,
    get: (path, headers = {}) => send(path, { method: 'GET', headers }),
    post: (path, fields, options = {}) => {
      const origin = options.origin === undefined ? ORIGIN : options.origin;
      return send(path, {
        method: 'POST',
        body: new URLSearchParams(fields).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(origin === null ? {} : { origin }),
          ...options.headers,
        },
      });
    },
    async csrfFrom(path) {
      const page = await (await self.get(path)).text();
      const token = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
      if (token === undefined) throw new Error(`No CSRF field in the page at ${path}:\n${page.slice(0, 500)}`);
      return token;
    },
  };
  return self;
}
