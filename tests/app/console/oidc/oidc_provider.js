// A real OpenID Provider on loopback for the console's sign-in tests: the certified `oidc-provider`
// package, one confidential client, a few accounts with a `groups` claim, and a scripted login page
// (a user-name form; no consent step: the grant is made for the scopes asked).
//
// Usage: node oidc_provider.js '<json options>'
//   options: { host, clientId, clientSecret, redirectUri, postLogoutRedirectUri }
// Prints one JSON line {"issuer": ..., "port": ...} on stdout once it listens, then serves until killed.
//
// Test hooks (only in this script, never in the product): POST /__test__/tamper with {"mode": M}
// rewrites the next ID tokens the token endpoint returns:
//   signature   same claims, signed by another key under the provider's key id
//   nonce       another nonce, signed by the provider's key
//   aud         another audience, signed by the provider's key
//   iss         another issuer, signed by the provider's key
//   expired     issued and expired an hour ago, signed by the provider's key
//   none        "alg": "none" and no signature
//   rotate      signed by a new key that /jwks publishes from now on (a key rotation)
//   unknown_kid signed by a key that /jwks never publishes
//   no_groups   the groups claim left out (signed by the provider's key): the userinfo endpoint has it
//   ""          no change
// POST /__test__/groups with login=NAME&groups=a,b sets that account's groups (a change at the provider).
// GET /__test__/stats answers {"jwks_fetches": n} (how often /jwks was read).
import { generateKeyPairSync, randomUUID } from "node:crypto";
import http from "node:http";

import * as jose from "jose";
import Provider from "oidc-provider";

const options = JSON.parse(process.argv[2] || "{}");
const host = options.host || "localhost";

const ACCOUNTS = {
  alice: { name: "Alice Operator", groups: ["cg-operators", "staff"] },
  bob: { name: "Bob Admin", groups: ["cg-admins"] },
  sam: { name: "Sam Student", groups: ["students"] },
  ada: { name: "Ada Elsewhere", groups: ["cg-admins"] }, // same name as a local console user
};

function newKey(kid) {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { ...privateKey.export({ format: "jwk" }), kid, alg: "ES256", use: "sig" };
}

function publicJwk(jwk) {
  const { d, ...rest } = jwk;
  return rest;
}

const signingKey = newKey("k1");
const extraPublished = []; // keys published by /jwks after a rotation
let tamperMode = "";
let jwksFetches = 0;

async function sign(claims, jwk) {
  const key = await jose.importJWK(jwk, "ES256");
  return new jose.SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: jwk.kid, typ: "JWT" }).sign(key);
}

async function tamper(idToken, mode) {
  const claims = jose.decodeJwt(idToken);
  const now = Math.floor(Date.now() / 1000);
  switch (mode) {
    case "signature":
      return sign(claims, { ...newKey("k1") }); // another key, the provider's key id
    case "nonce":
      return sign({ ...claims, nonce: "not-the-nonce-that-was-sent" }, signingKey);
    case "aud":
      return sign({ ...claims, aud: "another-client" }, signingKey);
    case "iss":
      return sign({ ...claims, iss: "https://idp.attacker.example" }, signingKey);
    case "expired":
      return sign({ ...claims, iat: now - 3600, exp: now - 1800 }, signingKey);
    case "none": {
      const b64 = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
      return `${b64({ alg: "none", typ: "JWT" })}.${b64(claims)}.`;
    }
    case "rotate": {
      const rotated = newKey(`rotated-${randomUUID()}`);
      extraPublished.push(rotated);
      return sign(claims, rotated);
    }
    case "unknown_kid":
      return sign(claims, newKey(`unpublished-${randomUUID()}`));
    case "no_groups": {
      const { groups, ...rest } = claims;
      return sign(rest, signingKey);
    }
    default:
      return idToken;
  }
}

function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body>${body}</body></html>`;
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let data = "";
    req.on("data", (chunk) => {
      data += chunk;
    });
    req.on("end", () => resolve(new URLSearchParams(data)));
    req.on("error", reject);
  });
}

const server = http.createServer();
server.listen(0, host, () => {
  const { port } = server.address();
  const issuer = `http://${host}:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [options.redirectUri],
        post_logout_redirect_uris: [options.postLogoutRedirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
        id_token_signed_response_alg: "ES256",
      },
    ],
    jwks: { keys: [signingKey] },
    cookies: { keys: ["campusguard-test-provider-cookie-key"] },
    claims: {
      openid: ["sub"],
      profile: ["name", "preferred_username"],
      email: ["email"],
      groups: ["groups"],
    },
    conformIdTokenClaims: false, // the groups go into the ID token, as Entra ID and Keycloak put them
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        async logoutSource(ctx, form) {
          ctx.body = page(
            "Sign out",
            `${form}<p>Sign out of the test provider?</p>` +
              '<button id="op-logout" type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>',
          );
        },
      },
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, id) {
      const account = ACCOUNTS[id];
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, preferred_username: id, name: account.name, email: `${id}@campus.test`, groups: account.groups };
        },
      };
    },
    async loadExistingGrant(ctx) {
      // a first-party client: no consent step, the grant covers the scopes asked for
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope(ctx.oidc.params.scope);
      await grant.save();
      return grant;
    },
  });

  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/jwks" && ctx.method === "GET") {
      jwksFetches += 1;
      if (ctx.status === 200 && extraPublished.length) {
        ctx.body = { keys: [...ctx.body.keys, ...extraPublished.map(publicJwk)] };
      }
    }
    if (ctx.path === "/token" && ctx.status === 200 && tamperMode && ctx.body?.id_token) {
      ctx.body = { ...ctx.body, id_token: await tamper(ctx.body.id_token, tamperMode) };
    }
  });

  const callback = provider.callback();
  server.on("request", async (req, res) => {
    const url = new URL(req.url, issuer);
    try {
      if (url.pathname === "/__test__/tamper" && req.method === "POST") {
        tamperMode = (await readForm(req)).get("mode") || "";
        res.writeHead(204).end();
        return;
      }
      if (url.pathname === "/__test__/groups" && req.method === "POST") {
        const form = await readForm(req);
        const account = ACCOUNTS[form.get("login")];
        if (account) account.groups = (form.get("groups") || "").split(",").filter(Boolean);
        res.writeHead(account ? 204 : 404).end();
        return;
      }
      if (url.pathname === "/__test__/stats") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jwks_fetches: jwksFetches }));
        return;
      }
      const match = url.pathname.match(/^\/interaction\/([\w-]+)(\/login)?$/);
      if (match) {
        const details = await provider.interactionDetails(req, res);
        if (req.method === "GET") {
          res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(
            page(
              "Campus sign-in",
              `<h1>Campus sign-in (test provider)</h1><form method="post" action="/interaction/${details.uid}/login">` +
                '<label>User <input id="op-login" name="login" autofocus></label>' +
                '<button id="op-submit" type="submit">Sign in</button></form>',
            ),
          );
          return;
        }
        const login = (await readForm(req)).get("login") || "";
        if (!ACCOUNTS[login]) {
          res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(
            page("Campus sign-in", `<p>No account ${escapeHtml(login)}.</p>`),
          );
          return;
        }
        await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
        return;
      }
      callback(req, res);
    } catch (err) {
      res.writeHead(500, { "content-type": "text/plain" }).end(String(err));
    }
  });

  process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
});
