// A real OAuth 2.1 authorization server for the hosted tests: panva's oidc-provider, run as a plain Node process.
//
//   node issuer.mjs            -> prints one JSON line {"issuer": ..., "port": ...} once it listens
//
// It offers what an MCP client meets at a real identity provider: discovery, Dynamic Client Registration (open),
// client ID metadata documents (CIMD: an https client_id naming the client's own metadata), authorization code with
// PKCE (S256, always required), resource indicators (RFC 8707) issuing JWT access tokens whose audience is the
// resource (the vaultsync server's URL), refresh tokens, and the library's development interactions: any login is
// accepted, and a test drives the login and consent forms over plain HTTP.
//
// Environment (all optional):
//   ISSUER_PORT          port to listen on (0, the default: any free one); the host is always 127.0.0.1
//   ISSUER_URL           the public issuer URL (behind a TLS proxy); default http://127.0.0.1:PORT
//   ISSUER_SCOPES        the resource scopes offered (default "vault:read vault:write vault:admin")
//   ISSUER_ACCESS_TTL    access token lifetime in seconds (default 600)
//   ISSUER_SHORT_TTL     lifetime for clients whose client_name ends with "(short-lived)" (default 3): the refresh tests
//   ISSUER_GROUPS        JSON {"subject": ["group", ...]}: a "groups" claim in those subjects' access tokens
//   ISSUER_KEYS_FILE     a JSON file {"keys": [private JWKs]} to sign with (default: one fresh RSA key per run)
//   ISSUER_ALLOW_LOOPBACK_FETCH=1  lets CIMD documents be fetched from 127.0.0.1 (the library refuses special-use
//                        addresses, a safeguard a local test cannot meet); NODE_EXTRA_CA_CERTS trusts a local CA
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const env = process.env;
const SCOPES = (env.ISSUER_SCOPES || 'vault:read vault:write vault:admin').split(/\s+/).filter(Boolean);
const ACCESS_TTL = Number(env.ISSUER_ACCESS_TTL || 600);
const SHORT_TTL = Number(env.ISSUER_SHORT_TTL || 3);
const GROUPS = env.ISSUER_GROUPS ? JSON.parse(env.ISSUER_GROUPS) : {};

function signingKeys() {
  if (env.ISSUER_KEYS_FILE) return JSON.parse(readFileSync(env.ISSUER_KEYS_FILE, 'utf8')).keys;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return [{ ...jwk, kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' }];
}

function ttlFor(client) {
  return client?.clientName?.endsWith('(short-lived)') ? SHORT_TTL : ACCESS_TTL;
}

function configuration() {
  return {
    clients: [],
    jwks: { keys: signingKeys() },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    scopes: ['openid', 'offline_access', ...SCOPES],
    claims: { openid: ['sub', 'groups'] },
    findAccount: async (_ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, groups: GROUPS[sub] || [] }),
    }),
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resource, client) => ({
          scope: SCOPES.join(' '),
          audience: resource,
          accessTokenTTL: ttlFor(client),
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    // Every client allowed the refresh_token grant gets a refresh token (not only with offline_access).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    extraTokenClaims: async (_ctx, token) => {
      const groups = token.accountId ? GROUPS[token.accountId] : undefined;
      return groups ? { groups } : undefined;
    },
    ttl: {
      AccessToken: (_ctx, _token, client) => ttlFor(client),
      RefreshToken: 24 * 3600,
    },
    ...(env.ISSUER_ALLOW_LOOPBACK_FETCH === '1'
      ? {
        fetch: (url, options) => {
          const { dispatcher, ...rest } = options;
          return globalThis.fetch(url, rest);
        },
      }
      : {}),
    renderError: async (ctx, out) => {
      ctx.type = 'json';
      ctx.body = out;
    },
  };
}

const server = http.createServer();
server.listen(Number(env.ISSUER_PORT || 0), '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = env.ISSUER_URL || `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, configuration());
  provider.proxy = true; // behind a TLS proxy: X-Forwarded-Proto/Host name the public URL
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
