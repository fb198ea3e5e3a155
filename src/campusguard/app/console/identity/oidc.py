"""Campus sign-in through an OpenID Provider: authorization code with PKCE (S256), ``state`` and ``nonce``.

`OidcSignIn` does the protocol; `campusguard.app.console.identity.oidc_pages` serves its two routes.

- Discovery: ``<issuer>/.well-known/openid-configuration`` is read on first use (kept an hour); it
  must name the configured issuer.
- Keys: the provider's JWKS is kept by `KeyCache`. An ID token signed with a key id the cache does not
  know makes it read the JWKS again (a key rotation), at most once per ``min_refetch_s``, so a flood
  of made-up key ids cannot make the console hammer the provider.
- ID tokens (`OidcSignIn.validate_id_token`, the one path the callback takes): the algorithm must be
  one of the provider's advertised asymmetric algorithms (never ``none``, never an HMAC the client
  secret could forge); the signature is checked with the JWKS key of the token's ``kid``; then
  ``iss`` (the issuer), ``aud`` (the client id; ``azp`` when there are several), ``exp``, ``iat``,
  ``sub`` and ``nonce`` (the one sent) are checked by Authlib's `CodeIDToken` with a minute of leeway.
- The round trip: ``state``, ``nonce``, the PKCE verifier and where to go afterwards ride in a
  short-lived ``SameSite=Lax`` cookie sealed with AES-GCM under a key of this process (`TransactionSeal`):
  the provider's redirect back is a cross-site navigation, on which a browser withholds the
  ``SameSite=Strict`` session cookie but sends a Lax one. A restart voids sign-ins under way.
- Roles: the values of ``role_claim`` mapped by ``role_map``; the highest wins; none: refused.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from campusguard.app.config.console import ConsoleConfig, OidcConfig
from campusguard.app.console.identity.users import ROLES, check_user_name
from campusguard.errors import InvalidInputError, require

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "CALLBACK_PATH",
    "LOGIN_PATH",
    "OIDC_COOKIE",
    "Identity",
    "KeyCache",
    "OidcSignIn",
    "ProviderMetadata",
    "SignInRefused",
    "Transaction",
    "TransactionSeal",
    "build_oidc",
    "safe_next",
]

log = logging.getLogger(__name__)

LOGIN_PATH = "/auth/oidc/login"
CALLBACK_PATH = "/auth/oidc/callback"
OIDC_COOKIE = "cg_oidc"
TRANSACTION_TTL_S = 600
LEEWAY_S = 60
METADATA_TTL_S = 3600.0
MAX_DOCUMENT_BYTES = 1 << 20
# signatures only the provider can make: never "none", never HMAC (a client secret would forge it)
ASYMMETRIC_ALGORITHMS: frozenset[str] = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)


class SignInRefused(Exception):
    """A sign-in that cannot go on: ``reason`` (one line, audited) and what the page tells the person.

    Attributes:
        reason: short and factual, for the audit log (``"wrong nonce"``).
        message: the sentence the refusal page shows.
        status: the HTTP status of the refusal page.
        user: the user name, when known.
    """

    def __init__(self, reason: str, message: str | None = None, *, status: int = 400, user: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.message = message or f"Sign-in failed: {reason}. Start again from the login page."
        self.status = status
        self.user = user


def safe_next(value: str | None) -> str:
    """A path on this site to go to after sign-in (``/x``), never ``//host``, ``/\\host``, a URL or the login page.

    Characters outside printable ASCII are percent-encoded (the path goes into a ``Refresh`` header).
    """
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or len(value) > 2048:
        return "/"
    if value.startswith(("/login", "/auth/")) or any(c < " " or c in "\x7f\\" for c in value):
        return "/"  # a browser drops a tab or a line break: "/\t/host" would become "//host"
    return quote(value, safe="/?&=%:;,+@!$()*~.-_#")


@dataclass(frozen=True)
class ProviderMetadata:
    """What the console uses of a provider's discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: tuple[str, ...]
    token_auth_methods: tuple[str, ...]
    end_session_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    iss_parameter: bool = False

    @classmethod
    def from_document(cls, document: Any, issuer: str) -> ProviderMetadata:
        """Check a discovery document against the configured issuer.

        Raises:
            SignInRefused: not a discovery document of ``issuer``, or no asymmetric algorithm advertised.
        """
        if not isinstance(document, dict):
            raise SignInRefused("the provider's discovery document is not a JSON object", status=502)
        if document.get("issuer") != issuer:
            raise SignInRefused(
                f"the provider's discovery document names issuer {str(document.get('issuer'))[:200]!r}, "
                f"not the configured {issuer!r}",
                status=502,
            )
        scheme = urlsplit(issuer).scheme
        urls = {}
        for key in (
            "authorization_endpoint",
            "token_endpoint",
            "jwks_uri",
            "userinfo_endpoint",
            "end_session_endpoint",
        ):
            value = document.get(key)
            optional = key in ("userinfo_endpoint", "end_session_endpoint")
            if optional and not (isinstance(value, str) and value):
                continue
            if not isinstance(value, str) or urlsplit(value).scheme not in ("https", "http"):
                raise SignInRefused(f"the provider's discovery document has no usable {key}", status=502)
            if urlsplit(value).scheme != scheme:  # an https issuer's codes and tokens never travel over http
                raise SignInRefused(
                    f"the provider's {key} uses {urlsplit(value).scheme}, not the issuer's {scheme}", status=502
                )
            urls[key] = value
        advertised = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = tuple(a for a in advertised if a in ASYMMETRIC_ALGORITHMS)
        if not algorithms:
            raise SignInRefused(
                f"the provider signs ID tokens only with {advertised!r}; an asymmetric algorithm is needed", status=502
            )
        methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return cls(
            issuer=issuer,
            authorization_endpoint=urls["authorization_endpoint"],
            token_endpoint=urls["token_endpoint"],
            jwks_uri=urls["jwks_uri"],
            algorithms=algorithms,
            token_auth_methods=tuple(str(m) for m in methods),
            end_session_endpoint=urls.get("end_session_endpoint"),
            userinfo_endpoint=urls.get("userinfo_endpoint"),
            iss_parameter=document.get("authorization_response_iss_parameter_supported") is True,
        )


class KeyCache:
    """The provider's signing keys by key id, read again on an unknown key id at most once per ``min_refetch_s``.

    Args:
        fetch: returns the JWKS document (``{"keys": [...]}``).
        min_refetch_s: the least time between two reads caused by unknown key ids.
        max_age_s: keys older than this are read again at the next use (retired keys go away).
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self,
        fetch: Callable[[], Any],
        *,
        min_refetch_s: float = 30.0,
        max_age_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self.min_refetch_s = min_refetch_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()
        self.fetches = 0

    def _load(self, now: float) -> None:
        jwk = require("joserfc.jwk", "console")
        document = self._fetch()
        keys: dict[str | None, Any] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwk.import_key(entry)
            except Exception:  # one odd key (an unknown type) must not hide the others
                continue
            keys[entry.get("kid")] = key
        self._keys = keys
        self._fetched_at = now
        self.fetches += 1

    def key_for(self, kid: str | None) -> Any:
        """The key of ``kid`` (a token without ``kid``: the only key, when there is exactly one).

        Raises:
            SignInRefused: no such key, even after reading the JWKS again (when allowed now).
        """
        now = self._clock()
        with self._lock:
            if (
                self._fetched_at is None
                or now - self._fetched_at >= self.max_age_s
                or self._lookup(kid) is None
                and now - self._fetched_at >= self.min_refetch_s
            ):
                self._load(now)
            key = self._lookup(kid)
        if key is None:
            raise SignInRefused(
                "the ID token is signed with a key the provider does not publish"
                if kid is not None
                else "the ID token names no key id and the provider publishes several keys"
            )
        return key

    def _lookup(self, kid: str | None) -> Any:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)


class TransactionSeal:
    """Seals the sign-in round trip into a cookie value with AES-GCM (confidential and tamper-evident).

    The key lives in this process only (a restart voids sign-ins under way, which costs a click),
    unless consoles sharing their identity in PostgreSQL share it (`OidcSignIn`'s ``seal_key``).
    """

    _AAD = b"campusguard-oidc-transaction-v1"

    def __init__(self, key: bytes | None = None) -> None:
        aead = require("cryptography.hazmat.primitives.ciphers.aead", "console")
        self._aesgcm = aead.AESGCM(key or aead.AESGCM.generate_key(bit_length=256))

    def seal(self, payload: Mapping[str, Any]) -> str:
        nonce = secrets.token_bytes(12)
        sealed = self._aesgcm.encrypt(nonce, json.dumps(dict(payload)).encode(), self._AAD)
        return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, value: str) -> dict[str, Any] | None:
        """The payload, or ``None`` when the value is not one this process sealed."""
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            payload = json.loads(self._aesgcm.decrypt(raw[:12], raw[12:], self._AAD))
        except Exception:
            return None
        return payload if isinstance(payload, dict) else None


@dataclass(frozen=True)
class Transaction:
    """One sign-in under way: what the callback must see again."""

    state: str
    nonce: str
    verifier: str
    next_path: str
    expires: float


@dataclass(frozen=True)
class ProviderGrant:
    """What the provider gave a sign-in, kept in this process only (never on disk) to re-check the
    session later (`OidcSignIn.recheck`): the access token, the refresh token when there is one,
    and when the access token expires (wall clock, s; ``None``: not said)."""

    access_token: str | None = None
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None

    @classmethod
    def from_tokens(cls, tokens: Mapping[str, Any], now: float) -> ProviderGrant:
        access, refresh = tokens.get("access_token"), tokens.get("refresh_token")
        expires_in = tokens.get("expires_in")
        return cls(
            access if isinstance(access, str) and access else None,
            refresh if isinstance(refresh, str) and refresh else None,
            now + float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None,
        )


@dataclass(frozen=True)
class Identity:
    """A verified provider user: who, the console role their claims map to, and the grant to re-check it with."""

    issuer: str
    subject: str
    name: str
    role: str
    values: tuple[str, ...]
    grant: ProviderGrant = field(default_factory=ProviderGrant, repr=False, compare=False)


class OidcSignIn:
    """The console's client of one OpenID Provider.

    Args:
        config: the ``console.oidc`` section.
        public_url: the console's address as browsers see it (``console.public_url``).
        client_secret: the client secret (read from ``client_secret_env``), or ``None`` for a public client.
        seal_key: the key of the round trip's cookie (`TransactionSeal`); ``None``: one of this process
            only. Consoles sharing their identity share it, so a sign-in may come back to another node.
        clock: wall-clock seconds (a parameter for tests).
    """

    def __init__(
        self,
        config: OidcConfig,
        public_url: str,
        client_secret: str | None,
        *,
        seal_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        require("requests", "console")
        require("authlib", "console")
        self.config = config
        self.public_url = public_url.rstrip("/")
        self.redirect_uri = self.public_url + CALLBACK_PATH
        self._client_secret = client_secret
        self._clock = clock
        self._metadata: ProviderMetadata | None = None
        self._metadata_at = 0.0
        self._lock = threading.Lock()
        self.keys = KeyCache(self._fetch_jwks)
        self.seal = TransactionSeal(seal_key)

    # provider documents ---------------------------------------------------------------------
    def _get_json(self, url: str, what: str) -> Any:
        import requests

        try:
            response = requests.get(
                url, headers={"Accept": "application/json"}, timeout=self.config.timeout_s, allow_redirects=False
            )
        except requests.RequestException as exc:
            raise SignInRefused(
                f"the provider's {what} cannot be read: {type(exc).__name__}",
                "The sign-in provider cannot be reached right now. Try again in a moment.",
                status=502,
            ) from None
        if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
            raise SignInRefused(
                f"the provider's {what} answered HTTP {response.status_code}",
                "The sign-in provider cannot be reached right now. Try again in a moment.",
                status=502,
            )
        try:
            return response.json()
        except ValueError:
            raise SignInRefused(f"the provider's {what} is not JSON", status=502) from None

    def metadata(self) -> ProviderMetadata:
        """The provider's discovery document (read on first use, then kept `METADATA_TTL_S`)."""
        with self._lock:
            now = time.monotonic()
            if self._metadata is None or now - self._metadata_at > METADATA_TTL_S:
                document = self._get_json(
                    self.config.issuer + "/.well-known/openid-configuration", "discovery document"
                )
                self._metadata = ProviderMetadata.from_document(document, self.config.issuer)
                self._metadata_at = now
            return self._metadata

    def _fetch_jwks(self) -> Any:
        return self._get_json(self.metadata().jwks_uri, "key set (JWKS)")

    def _client(self, metadata: ProviderMetadata) -> Any:
        from authlib.integrations.requests_client import OAuth2Session

        if self._client_secret is None:
            method = "none"
        elif "client_secret_basic" in metadata.token_auth_methods:
            method = "client_secret_basic"
        else:
            method = "client_secret_post"
        return OAuth2Session(
            client_id=self.config.client_id,
            client_secret=self._client_secret,
            token_endpoint_auth_method=method,
            scope=" ".join(self.config.scopes),
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256",
        )

    # the round trip -------------------------------------------------------------------------
    def begin(self, next_path: str) -> tuple[str, str]:
        """Start a sign-in: the provider's authorization URL and the sealed transaction cookie value.

        Raises:
            SignInRefused: the provider cannot be reached or its discovery document is wrong.
        """
        metadata = self.metadata()
        transaction = Transaction(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            verifier=secrets.token_urlsafe(48),  # 64 characters, within RFC 7636's 43-128
            next_path=safe_next(next_path),
            expires=self._clock() + TRANSACTION_TTL_S,
        )
        with self._client(metadata) as client:
            url, _ = client.create_authorization_url(
                metadata.authorization_endpoint,
                state=transaction.state,
                nonce=transaction.nonce,
                code_verifier=transaction.verifier,
            )
        return url, self.seal.seal(transaction.__dict__)

    def open_transaction(self, cookie: str | None) -> Transaction:
        """The sign-in under way that ``cookie`` carries.

        Raises:
            SignInRefused: no cookie, one this process did not seal, or one older than ten minutes.
        """
        payload = self.seal.open(cookie) if cookie else None
        if payload is None:
            raise SignInRefused(
                "no sign-in under way in this browser (missing or unreadable sign-in cookie)",
                "This sign-in was not started here, or the console restarted meanwhile. Start again from the login page.",
            )
        try:
            transaction = Transaction(**payload)
        except TypeError:
            raise SignInRefused("unreadable sign-in cookie") from None
        if transaction.expires < self._clock():
            raise SignInRefused(
                "the sign-in took longer than 10 minutes", "The sign-in took too long. Start again from the login page."
            )
        return transaction

    def finish(self, params: Mapping[str, str], cookie: str | None) -> tuple[Identity, Transaction]:
        """Complete a sign-in from the callback's query parameters and the transaction cookie.

        Checks ``state`` and the ``iss`` parameter (RFC 9207), trades the code for tokens (with the
        PKCE verifier), verifies the ID token (`validate_id_token`) and maps the role.

        Raises:
            SignInRefused: at the first check that fails, with the reason.
        """
        transaction = self.open_transaction(cookie)
        if "error" in params:
            # an error code is a token (RFC 6749 4.1.2.1); anything else is not shown, it may be a lure
            error = re.sub(r"[^A-Za-z0-9_.-]", "", str(params.get("error", "")))[:64] or "an error"
            detail = re.sub(r"[^\x20-\x7e]", "", str(params.get("error_description", "")))[:200]
            raise SignInRefused(
                f"the provider answered {error}" + (f": {detail}" if detail else ""),
                f"The sign-in provider did not sign you in ({error}). Start again from the login page.",
            )
        state = params.get("state", "")
        if not hmac.compare_digest(state.encode(), transaction.state.encode()):
            raise SignInRefused("wrong state (the answer belongs to another sign-in)")
        metadata = self.metadata()
        iss = params.get("iss")
        if (iss is not None and iss != metadata.issuer) or (iss is None and metadata.iss_parameter):
            raise SignInRefused("the answer does not come from the configured issuer (iss parameter)")
        code = params.get("code")
        if not code:
            raise SignInRefused("the provider's answer has no code")
        tokens = self._exchange(metadata, code, transaction.verifier)
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise SignInRefused("the token endpoint returned no ID token (is openid among the scopes?)")
        access_token = tokens.get("access_token")
        claims = self.validate_id_token(id_token, nonce=transaction.nonce, access_token=access_token)
        wanted = (self.config.role_claim, *self.config.username_claims)
        if any(c not in claims for c in wanted) and isinstance(access_token, str):
            claims = self._with_userinfo(metadata, claims, access_token, wanted)
        identity = self.identity(claims)
        return replace(identity, grant=ProviderGrant.from_tokens(tokens, self._clock())), transaction

    def recheck(self, identity: Identity) -> Identity:
        """Ask the provider again about a signed-in user: a refresh (with the refresh token) when
        there is one, else userinfo with the access token; their groups are mapped again.

        Returns:
            The identity now (its role may have changed), with the grant to use next time.

        Raises:
            SignInRefused: status 502 when the provider cannot be asked now (keep the session, try
                later); any other status when it refuses (the grant was revoked, the access token
                expired without a refresh token, another subject) or no group maps to a role any more.
        """
        metadata = self.metadata()
        grant = identity.grant
        claims: dict[str, Any] = {"iss": identity.issuer, "sub": identity.subject}
        if grant.refresh_token is not None:
            tokens = self._refresh(metadata, grant.refresh_token)
            grant = ProviderGrant.from_tokens({"refresh_token": grant.refresh_token, **tokens}, self._clock())
            id_token = tokens.get("id_token")
            if isinstance(id_token, str) and id_token:
                fresh = self.validate_id_token(id_token, nonce=None)
                if fresh.get("sub") != identity.subject:
                    raise SignInRefused("the refreshed ID token is about another subject (sub)")
                claims.update(fresh)
        if grant.access_token is None:
            raise SignInRefused("no access token to ask the provider with; sign in again")
        if grant.expires_at is not None and grant.expires_at <= self._clock():
            raise SignInRefused("the provider's access token expired and no refresh token was given; sign in again")
        wanted = (self.config.role_claim, *self.config.username_claims)
        if self.config.role_claim not in claims or metadata.userinfo_endpoint is not None:
            claims = self._with_userinfo(metadata, claims, grant.access_token, wanted, fresh=True)
        checked = self.identity({**claims, "iss": identity.issuer, "sub": identity.subject})
        return replace(checked, name=identity.name, grant=grant)

    def _refresh(self, metadata: ProviderMetadata, refresh_token: str) -> dict[str, Any]:
        return self._ask_token_endpoint(
            metadata,
            "the provider refused the refresh",
            lambda client: client.refresh_token(
                metadata.token_endpoint,
                refresh_token=refresh_token,
                timeout=self.config.timeout_s,
                allow_redirects=False,
            ),
        )

    def _with_userinfo(
        self,
        metadata: ProviderMetadata,
        claims: dict[str, Any],
        access_token: str,
        wanted: tuple[str, ...],
        *,
        fresh: bool = False,
    ) -> dict[str, Any]:
        """The ID token's claims, with those of ``wanted`` it lacks taken from the provider's userinfo endpoint.

        Some providers (and some provider settings) put groups only there. The answer must be about the
        same ``sub``; the ID token's own claims always win, unless ``fresh`` (a re-check: userinfo is
        the newer word, and a 401 there means the grant is gone).

        Raises:
            SignInRefused: the endpoint fails (502), refuses the token (401/403), or answers about another subject.
        """
        import requests

        if metadata.userinfo_endpoint is None:
            return claims
        try:
            response = requests.get(
                metadata.userinfo_endpoint,
                headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"},
                timeout=self.config.timeout_s,
                allow_redirects=False,
            )
            if response.status_code in (401, 403):
                raise SignInRefused(f"the provider's userinfo endpoint refused the access token (HTTP {response.status_code})")
            info = response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            info = None
        if not isinstance(info, dict):
            raise SignInRefused("the provider's userinfo endpoint gave no claims", status=502)
        if info.get("sub") != claims.get("sub"):
            raise SignInRefused("the provider's userinfo answer is about another subject (sub)")
        taken = {c: info[c] for c in wanted if c in info}
        return {**claims, **taken} if fresh else {**taken, **claims}

    def _exchange(self, metadata: ProviderMetadata, code: str, verifier: str) -> dict[str, Any]:
        return self._ask_token_endpoint(
            metadata,
            "the token endpoint refused the code",
            lambda client: client.fetch_token(
                metadata.token_endpoint,
                grant_type="authorization_code",
                code=code,
                code_verifier=verifier,
                timeout=self.config.timeout_s,
                allow_redirects=False,
            ),
        )

    def _ask_token_endpoint(
        self, metadata: ProviderMetadata, refused: str, request: Callable[[Any], Any]
    ) -> dict[str, Any]:
        """The token endpoint's answer to ``request``, called with an OAuth client for ``metadata``.

        Raises:
            SignInRefused: ``refused`` and the OAuth error when the endpoint refuses; status 502 when
                it cannot be reached or its answer is not JSON.
        """
        import requests
        from authlib.integrations.base_client import OAuthError

        try:
            with self._client(metadata) as client:
                token = request(client)
        except OAuthError as exc:
            raise SignInRefused(f"{refused}: {exc.error}") from None
        except requests.RequestException as exc:
            raise SignInRefused(f"the token endpoint cannot be reached: {type(exc).__name__}", status=502) from None
        except ValueError:
            raise SignInRefused("the token endpoint's answer is not JSON", status=502) from None
        return dict(token)

    # the ID token ---------------------------------------------------------------------------
    def validate_id_token(
        self, id_token: str, *, nonce: str | None, access_token: str | None = None
    ) -> dict[str, Any]:
        """The claims of an ID token whose algorithm, signature, ``iss``, ``aud``, ``exp`` and ``nonce`` are right
        (``nonce`` None: a refreshed ID token, which carries none to check).

        Raises:
            SignInRefused: naming the first check that fails.
        """
        from authlib.oidc.core import CodeIDToken
        from joserfc import jwt
        from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, JoseError

        metadata = self.metadata()
        header = _header_of(id_token)
        alg = header.get("alg")
        if alg not in metadata.algorithms:
            shown = str(alg)[:20]
            raise SignInRefused(
                f"ID token algorithm {shown!r} is not one the provider signs with ({', '.join(metadata.algorithms)})"
            )
        kid = header.get("kid")
        key = self.keys.key_for(kid if isinstance(kid, str) else None)
        try:
            token = jwt.decode(id_token, key, algorithms=[alg])
        except BadSignatureError:
            raise SignInRefused("the ID token's signature is wrong") from None
        except JoseError as exc:
            raise SignInRefused(f"the ID token cannot be verified: {exc.error or type(exc).__name__}") from None
        options: dict[str, Any] = {
            "iss": {"essential": True, "value": metadata.issuer},
            "aud": {"essential": True, "value": self.config.client_id},
            "sub": {"essential": True},
            "exp": {"essential": True},
        }
        if nonce is not None:
            options["nonce"] = {"essential": True, "value": nonce}
        params: dict[str, Any] = {"client_id": self.config.client_id}
        if nonce is not None:
            params["nonce"] = nonce
        if access_token:
            params["access_token"] = access_token
        claims = CodeIDToken(token.claims, token.header, options, params)
        try:
            claims.validate(now=int(self._clock()), leeway=LEEWAY_S)
        except ExpiredTokenError:
            raise SignInRefused("the ID token has expired (exp)") from None
        except ClaimError as exc:
            what = {"iss": "issuer", "aud": "audience", "nonce": "nonce", "azp": "authorized party"}.get(exc.claim)
            raise SignInRefused(
                f"wrong {what} ({exc.claim}) in the ID token" if what else f"the ID token's {exc.claim} claim: {exc}"
            ) from None
        return dict(claims)

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """The console identity of verified claims: user name (first usable of ``username_claims``) and role.

        Raises:
            SignInRefused: no usable user name, or no value of ``role_claim`` mapped to a role (403).
        """
        name = next((str(claims[c]) for c in self.config.username_claims if _usable_name_claim(claims, c)), None)
        if name is None:
            raise SignInRefused(
                f"the ID token has none of the user name claims {', '.join(self.config.username_claims)}"
                " (an email counts only with email_verified: true)",
                status=403,
            )
        try:
            check_user_name(name)
        except InvalidInputError:
            raise SignInRefused(
                f"the provider's user name {name[:80]!r} is not a valid console user name", status=403
            ) from None
        raw = claims.get(self.config.role_claim)
        values = tuple(str(v) for v in (raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []))
        roles = [self.config.role_map[v] for v in values if v in self.config.role_map]
        if not roles:
            raise SignInRefused(
                f"no role: none of the {len(values)} value(s) of the {self.config.role_claim!r} claim is mapped to a role",
                f"You signed in as {name}, but none of your groups gives you a role in this console "
                f"(the {self.config.role_claim!r} claim maps no value to viewer, operator or admin). "
                "Ask the console's administrator to map one of your groups to a role.",
                status=403,
                user=name,
            )
        role = max(roles, key=ROLES.index)
        return Identity(str(claims["iss"]), str(claims["sub"]), name, role, values)

    def end_session_url(self) -> str | None:
        """Where a browser ends its provider session after logout (RP-initiated logout), when the provider offers it.

        Uses only the discovery document already read (never a network call while a page renders).
        """
        metadata = self._metadata
        if metadata is None or metadata.end_session_endpoint is None:
            return None
        query = urlencode({"client_id": self.config.client_id, "post_logout_redirect_uri": self.public_url + "/login"})
        joiner = "&" if "?" in metadata.end_session_endpoint else "?"
        return metadata.end_session_endpoint + joiner + query


def _usable_name_claim(claims: Mapping[str, Any], claim: str) -> bool:
    """Whether ``claim`` can name the account: a non-empty string, and for ``email`` only one the
    provider says it verified (``email_verified: true``): anyone can type an unverified address."""
    value = claims.get(claim)
    if not isinstance(value, str) or not value:
        return False
    return claim != "email" or claims.get("email_verified") is True


def _header_of(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWS (not verified: it only picks the key and is checked against the allowed algs)."""
    if not isinstance(token, str) or token.count(".") != 2 or len(token) > 64 * 1024:
        raise SignInRefused("the ID token is not a compact JWS")
    head = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        raise SignInRefused("the ID token's header is not readable") from None
    if not isinstance(header, dict):
        raise SignInRefused("the ID token's header is not a JSON object")
    return header


def build_oidc(
    console: ConsoleConfig, *, environ: Mapping[str, str] | None = None, seal_key: bytes | None = None
) -> OidcSignIn | None:
    """The sign-in of a ``console`` section, or ``None`` when it has no ``oidc`` (``seal_key``: as `OidcSignIn`).

    Raises:
        InvalidInputError: ``client_secret_env`` names a variable that is not set (one line).
    """
    oidc = console.oidc
    if oidc is None or console.public_url is None:
        return None
    env = os.environ if environ is None else environ
    secret = None
    if oidc.client_secret_env is not None:
        secret = env.get(oidc.client_secret_env)
        if not secret:
            raise InvalidInputError(
                f"console.oidc.client_secret_env: the environment variable {oidc.client_secret_env} is not set "
                "(it holds the client secret the provider gave the console)"
            )
    return OidcSignIn(oidc, console.public_url, secret, seal_key=seal_key)
