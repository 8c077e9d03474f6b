// A NATS URL as svc takes it (CONTRACT 1, 6.7): a comma-separated list of seed URLs, as NATS clients
// take `servers: [...]` (one server of a cluster is enough to find the others; any one of them may
// be down). A URL may name a user and password or a token: they go to the connection options,
// never into logs or errors.

/** The servers of a comma-separated NATS URL list. */
export function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

const SCHEMES = ['nats:', 'tls:'];

/**
 * `--nats` / SVC_NATS_URL: one URL or a comma-separated seed list, each `nats://host:port`,
 * `tls://host:port` or `host:port`. Returns the list as svc keeps it (trimmed, comma-separated);
 * an error names the URL at fault with its credentials hidden.
 */
export function parseNatsUrls(text: string): string {
  const servers = natsServers(text);
  if (!servers.length) throw new Error('no NATS URL (one, or a comma-separated list: nats://a:4222,nats://b:4222)');
  return servers
    .map((server) => {
      const withScheme = server.includes('://') ? server : `nats://${server}`;
      let u: URL;
      try {
        u = new URL(withScheme);
      } catch {
        throw new Error(`invalid NATS URL ${JSON.stringify(redactNatsUrl(server))}`);
      }
      if (!SCHEMES.includes(u.protocol) || !u.hostname || (u.pathname !== '' && u.pathname !== '/') || u.search || u.hash) {
        throw new Error(`invalid NATS URL ${JSON.stringify(redactNatsUrl(server))} (nats://host:port or tls://host:port)`);
      }
      return server.replace(/\/+$/, '');
    })
    .join(',');
}

/**
 * A NATS URL list as nats.js takes it: the servers without user info, and the credentials a URL
 * names (`nats://user:pass@host`, or `nats://token@host`) as connection options; nats.js does not
 * read them from the URL itself (CONTRACT 6.7).
 */
export function natsUrlOptions(url: string): { servers: string[]; user?: string; pass?: string; token?: string } {
  const out: { servers: string[]; user?: string; pass?: string; token?: string } = { servers: [] };
  for (const server of natsServers(url)) {
    const u = userInfoOf(server);
    if (!u) {
      out.servers.push(server);
      continue;
    }
    const colon = u.info.indexOf(':');
    if (colon >= 0) {
      out.user = decodeURIComponent(u.info.slice(0, colon));
      out.pass = decodeURIComponent(u.info.slice(colon + 1));
    } else out.token = decodeURIComponent(u.info);
    out.servers.push(`${u.scheme}${u.rest}`);
  }
  return out;
}

/** The URL list with every user name, password or token replaced by `***` (what logs and errors show). */
export function redactNatsUrl(url: string): string {
  return natsServers(url)
    .map((server) => {
      const u = userInfoOf(server);
      return u ? `${u.scheme}***@${u.rest}` : server;
    })
    .join(',');
}

/** A server URL cut around its user info (`scheme://` + info + `@` + rest), or null when it names none. */
function userInfoOf(server: string): { scheme: string; info: string; rest: string } | null {
  const s = server.indexOf('://');
  const start = s >= 0 ? s + 3 : 0;
  const end = server.indexOf('/', start);
  const at = server.slice(start, end < 0 ? undefined : end).lastIndexOf('@');
  if (at < 0) return null;
  return { scheme: server.slice(0, start), info: server.slice(start, start + at), rest: server.slice(start + at + 1) };
}
