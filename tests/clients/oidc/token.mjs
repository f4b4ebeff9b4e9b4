// Gets a client_credentials access token from provider.mjs, for manual
// testing (the Rust tests make the same request themselves):
//
//   node token.mjs <issuer> [resource] [--decode]
//
// resource defaults to urn:jmxgate. Client jmxgate-test, secret from
// OIDC_CLIENT_SECRET (default test-secret), client_secret_basic. The CA is
// taken from NODE_EXTRA_CA_CERTS (e.g. the provider's self-signed cert).
// Prints the access token, or with --decode its JOSE header and payload.

const args = process.argv.slice(2).filter((a) => a !== '--decode');
const decode = process.argv.includes('--decode');
const [issuer, resource = 'urn:jmxgate'] = args;
if (!issuer) {
    console.error('usage: node token.mjs <issuer> [resource] [--decode]');
    process.exit(2);
}
const secret = process.env.OIDC_CLIENT_SECRET || 'test-secret';

const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
const res = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: {
        authorization: `Basic ${Buffer.from(`jmxgate-test:${secret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'jolokia' }),
});
const body = await res.json();
if (!res.ok) {
    console.error(`token request failed: HTTP ${res.status} ${JSON.stringify(body)}`);
    process.exit(1);
}
if (!decode) {
    process.stdout.write(`${body.access_token}\n`);
} else {
    const [h, p] = body.access_token.split('.');
    const part = (s) => JSON.parse(Buffer.from(s, 'base64url').toString());
    const { access_token: _, ...rest } = body;
    console.log(JSON.stringify({ response: rest, header: part(h), payload: part(p) }, null, 2));
}
