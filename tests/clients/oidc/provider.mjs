// A real OpenID Connect provider (panva's certified oidc-provider) for the
// gateway's OIDC tests: HTTPS on 127.0.0.1, one confidential machine client
// (client_credentials), JWT access tokens for the resource indicators
// urn:jmxgate and urn:other, signed with keys from a JWKS file.
//
// Environment (see README.md):
//   OIDC_PORT           port to listen on; 0 or unset picks a free one
//   OIDC_TLS_CERT       PEM certificate (chain) file, required
//   OIDC_TLS_KEY        PEM private key file, required
//   OIDC_JWKS           private JWKS file, required; created with one new
//                       RS256 key (random kid) when it does not exist
//   OIDC_CLIENT_SECRET  secret of client jmxgate-test (default test-secret)
//   OIDC_TOKEN_TTL      access token lifetime in seconds (default 300)
//   OIDC_ROLES          comma-separated `roles` claim (default ops)
//   OIDC_REALM_ROLES    comma-separated `realm_access.roles` (default jmx-admin)
//   OIDC_CONSOLE_REDIRECT_URIS
//                       comma-separated redirect URIs of a public client
//                       jmxgate-console (authorization code with PKCE);
//                       unset, there is no such client
//   OIDC_USER_ROLES     `realm_access.roles` of the people who sign in
//                       there: `alice=jmx-admin;bob=viewer,other` (any
//                       password; consent is not asked)
//
// Prints exactly one line `READY <issuer>` on stdout once listening, and
// exits when stdin reaches EOF. Everything else goes to stderr.

import { randomBytes, randomUUID, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, renameSync } from 'node:fs';
import { createServer } from 'node:https';

// oidc-provider prints its NOTICEs with console.info (stdout): keep stdout
// for the READY line alone. Done before oidc-provider is loaded.
console.info = console.error;
console.log = console.error;
const { default: Provider, errors } = await import('oidc-provider');

function env(name, fallback) {
    const v = process.env[name];
    if (v === undefined || v === '') {
        if (fallback === undefined) {
            console.error(`provider.mjs: ${name} is not set`);
            process.exit(2);
        }
        return fallback;
    }
    return v;
}

const port = Number(env('OIDC_PORT', '0'));
const cert = readFileSync(env('OIDC_TLS_CERT'));
const key = readFileSync(env('OIDC_TLS_KEY'));
const jwksPath = env('OIDC_JWKS');
const clientSecret = env('OIDC_CLIENT_SECRET', 'test-secret');
const tokenTTL = Number(env('OIDC_TOKEN_TTL', '300'));
const list = (s) => s.split(',').map((r) => r.trim()).filter(Boolean);
const roles = list(env('OIDC_ROLES', 'ops'));
const realmRoles = list(env('OIDC_REALM_ROLES', 'jmx-admin'));
const consoleRedirects = list(env('OIDC_CONSOLE_REDIRECT_URIS', ''));
const userRoles = Object.fromEntries(
    env('OIDC_USER_ROLES', '')
        .split(';')
        .map((entry) => entry.split('='))
        .filter(([login]) => login && login.trim())
        .map(([login, roles]) => [login.trim(), list(roles ?? '')]),
);

const AUDIENCES = new Set(['urn:jmxgate', 'urn:other']);
const SCOPE = 'jolokia';

// The signing keys: reused from the file, or one new RS256 key written there.
function loadOrCreateJwks(path) {
    if (existsSync(path)) {
        const jwks = JSON.parse(readFileSync(path, 'utf8'));
        if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) {
            throw new Error(`${path}: no keys`);
        }
        return jwks;
    }
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = {
        ...privateKey.export({ format: 'jwk' }),
        kid: randomUUID(),
        alg: 'RS256',
        use: 'sig',
    };
    const jwks = { keys: [jwk] };
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(jwks, null, 2)}\n`, { mode: 0o600 });
    renameSync(tmp, path);
    console.error(`provider.mjs: generated a new RS256 key kid=${jwk.kid} in ${path}`);
    return jwks;
}
const jwks = loadOrCreateJwks(jwksPath);
// Access tokens are signed with the first key of the file, by its `alg`
// (RS256 when it has none).
const signingAlg = jwks.keys[0].alg ?? 'RS256';

// The issuer needs the port: listen first, then build the provider and
// hand requests to it.
let handler = (_req, res) => {
    res.statusCode = 503;
    res.end();
};
const server = createServer({ cert, key }, (req, res) => handler(req, res));
await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
});
const issuer = `https://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
    clients: [
        {
            client_id: 'jmxgate-test',
            client_secret: clientSecret,
            grant_types: ['client_credentials'],
            response_types: [],
            redirect_uris: [],
            // oidc-provider accepts client_secret_post for a
            // client_secret_basic client too (and vice versa).
            token_endpoint_auth_method: 'client_secret_basic',
            scope: SCOPE,
        },
        // The console's sign-in: a public client, so PKCE is required.
        ...(consoleRedirects.length === 0 ? [] : [{
            client_id: 'jmxgate-console',
            grant_types: ['authorization_code'],
            response_types: ['code'],
            redirect_uris: consoleRedirects,
            token_endpoint_auth_method: 'none',
            scope: `openid ${SCOPE}`,
        }]),
    ],
    // People sign in as any login with any password (the provider's
    // development login form); the grant is made at once, without asking.
    loadExistingGrant: async (ctx) => {
        const grantId = ctx.oidc.result?.consent?.grantId
            || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
        if (grantId) {
            return ctx.oidc.provider.Grant.find(grantId);
        }
        const grant = new ctx.oidc.provider.Grant({
            clientId: ctx.oidc.client.clientId,
            accountId: ctx.oidc.session.accountId,
        });
        grant.addOIDCScope(`openid ${SCOPE}`);
        for (const resource of AUDIENCES) {
            grant.addResourceScope(resource, SCOPE);
        }
        await grant.save();
        return grant;
    },
    jwks,
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    scopes: ['openid', SCOPE],
    features: {
        devInteractions: { enabled: consoleRedirects.length > 0 },
        clientCredentials: { enabled: true },
        introspection: { enabled: false },
        revocation: { enabled: false },
        resourceIndicators: {
            enabled: true,
            // No resource parameter: no audience (an opaque token); the tests
            // always ask for urn:jmxgate or urn:other.
            defaultResource: async (_ctx, _client, oneOf) => oneOf,
            useGrantedResource: async () => false,
            getResourceServerInfo: async (_ctx, resourceIndicator, _client) => {
                if (!AUDIENCES.has(resourceIndicator)) {
                    throw new errors.InvalidTarget();
                }
                return {
                    audience: resourceIndicator,
                    accessTokenFormat: 'jwt',
                    accessTokenTTL: tokenTTL,
                    scope: SCOPE,
                    jwt: { sign: { alg: signingAlg, kid: jwks.keys[0].kid } },
                };
            },
        },
    },
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    ttl: {
        ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? tokenTTL,
        AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? tokenTTL,
    },
    extraTokenClaims: async (_ctx, token) => {
        if (token.kind === 'AccessToken') {
            return { realm_access: { roles: userRoles[token.accountId] ?? [] } };
        }
        if (token.kind !== 'ClientCredentials') return undefined;
        return { roles, realm_access: { roles: realmRoles } };
    },
});
provider.on('server_error', (_ctx, err) => console.error('provider.mjs: server_error', err));
provider.on('grant.error', (_ctx, err) => console.error(`provider.mjs: grant.error ${err.message} ${err.error_description ?? ''}`));
handler = provider.callback();

process.stdout.write(`READY ${issuer}\n`);

// Exit when the test closes our stdin.
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
