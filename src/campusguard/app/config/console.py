"""The console section: the console's public address and campus sign-in through an OpenID Provider.

```yaml
console:
  public_url: https://cameras.campus.example
  oidc:
    name: Campus account
    issuer: https://login.microsoftonline.com/<tenant id>/v2.0
    client_id: 6f1c...
    client_secret_env: CAMPUSGUARD_OIDC_SECRET
    scopes: [openid, profile, email]
    role_claim: groups
    role_map: {"<security staff group id>": operator, "<IT admins group id>": admin}
    local_login: true
```

The issuer and the public address must use https; plain http is accepted only for a loopback host
(``localhost``, ``127.0.0.0/8``, ``::1``), which is what tests and a first try on one machine use.
`campusguard.app.console.identity.oidc` does the sign-in; nothing here does I/O (the secret is read from its
environment variable when the console starts).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from campusguard.app.config.base import ConfigModel

__all__ = ["ConsoleConfig", "OidcConfig", "is_loopback_host", "check_https_url"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CLAIM_NAME = re.compile(r"^[^\s]{1,128}$")


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); pure, no name lookup."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_https_url(value: str, what: str, *, allow_path: bool) -> str:
    """``value`` without a trailing slash if it is an https URL (http only for a loopback host).

    Raises:
        ValueError: naming ``what`` and the problem (pydantic reports it on the field).
    """
    parts = urlsplit(value.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} must be an https URL such as https://login.example.edu, got {value!r}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(
            f"{what} must use https; plain http is accepted only on a loopback host (localhost, 127.0.0.1, ::1), "
            f"got {value!r}"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{what} must not carry a query, fragment or credentials, got {value!r}")
    if not allow_path and parts.path not in ("", "/"):
        raise ValueError(f"{what} must be scheme, host and port only (the console is served at /), got {value!r}")
    return value.strip().rstrip("/")


class OidcConfig(ConfigModel):
    """Sign-in through the campus identity provider (OpenID Connect, authorization code with PKCE)."""

    name: str = Field(
        "campus account",
        min_length=1,
        max_length=64,
        title="Provider name",
        description='Shown on the login page as "Sign in with <name>" (for example "Microsoft", "Google", "UniID").',
    )
    issuer: str = Field(
        ...,
        max_length=512,
        title="Issuer",
        description=(
            "The provider's issuer URL; its discovery document is read from <issuer>/.well-known/openid-configuration "
            "and must name the same issuer. https only (http on a loopback host for tests)."
        ),
    )
    client_id: str = Field(
        ..., min_length=1, max_length=512, title="Client id", description="The client id the provider gave the console."
    )
    client_secret_env: str | None = Field(
        None,
        title="Client secret variable",
        description=(
            "Name of the environment variable holding the client secret (never the secret itself in this file); "
            "none for a public client, which then relies on PKCE alone."
        ),
    )
    scopes: list[str] = Field(
        default_factory=lambda: ["openid", "profile", "email"],
        min_length=1,
        max_length=32,
        title="Scopes",
        description="Scopes asked for; must include openid (add the one your provider needs for the role claim).",
    )
    username_claims: list[str] = Field(
        default_factory=lambda: ["preferred_username", "email"],
        min_length=1,
        max_length=8,
        title="User name claims",
        description=(
            "ID-token claims tried in order for the console user name made at first sign-in (1-64 letters, digits, "
            "'_', '.', '@', '-'). The account stays tied to the provider's subject (sub), not to the name."
        ),
    )
    role_claim: str = Field(
        "groups",
        title="Role claim",
        description="The ID-token claim (a list of strings, or one string) whose values role_map maps to console roles.",
    )
    role_map: dict[str, Literal["viewer", "operator", "admin"]] = Field(
        default_factory=dict,
        max_length=256,
        title="Role map",
        description=(
            "Claim value (group name or id) to console role; a user in several mapped groups gets the highest role, "
            "a user in none is refused. Applied at every sign-in."
        ),
    )
    local_login: bool = Field(
        True,
        title="Password login",
        description=(
            "Keep the console's own user-name-and-password login beside the provider's. false hides it and refuses "
            "password logins (API tokens and the `campusguard users` commands still work)."
        ),
    )
    timeout_s: float = Field(
        10.0, gt=0, le=120, title="Provider timeout", description="Seconds to wait for the provider on each request."
    )
    recheck_s: float = Field(
        900.0,
        ge=1,
        le=86400,
        title="Re-check interval",
        description=(
            "Seconds between checks of a signed-in user with the provider (a refresh with the refresh token, else "
            "userinfo with the access token; add offline_access to scopes where the provider gives refresh tokens "
            "only then): a user the provider no longer knows, or whose groups map to no role, loses the session; "
            "a changed role applies at once. Sessions of a previous run of the console are ended (their tokens "
            "live in memory only)."
        ),
    )

    @field_validator("issuer")
    @classmethod
    def _issuer_https(cls, value: str) -> str:
        return check_https_url(value, "the issuer", allow_path=True)

    @field_validator("client_secret_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                f"client_secret_env names an environment variable (like CAMPUSGUARD_OIDC_SECRET), got {value!r}"
            )
        return value

    @field_validator("scopes")
    @classmethod
    def _openid_scope(cls, value: list[str]) -> list[str]:
        if "openid" not in value:
            raise ValueError("scopes must include openid")
        bad = [s for s in value if not re.fullmatch(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}", s)]
        if bad:
            raise ValueError(f"scope {bad[0]!r} is not a valid scope token")
        return value

    @field_validator("username_claims")
    @classmethod
    def _claim_names(cls, value: list[str]) -> list[str]:
        for claim in value:
            cls._role_claim_name(claim)
        return value

    @field_validator("role_claim")
    @classmethod
    def _role_claim_name(cls, value: str) -> str:
        if not _CLAIM_NAME.match(value):
            raise ValueError(f"a claim name has 1-128 characters without spaces, got {value!r}")
        return value

    @field_validator("role_map")
    @classmethod
    def _some_role(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("role_map must map at least one claim value to a role (nobody could sign in otherwise)")
        return value


class ConsoleConfig(ConfigModel):
    """The operators' console (`campusguard serve`): its public address and campus sign-in."""

    public_url: str | None = Field(
        None,
        max_length=512,
        title="Public URL",
        description=(
            "The address browsers use for the console (https://host[:port]); the provider sends users back to "
            "<public_url>/auth/oidc/callback. Needed with oidc."
        ),
    )
    oidc: OidcConfig | None = Field(
        None,
        title="Campus sign-in (OIDC)",
        description="Sign-in through an OpenID Provider (Entra ID, Google, Keycloak, Shibboleth's OIDC plugin); none: off.",
    )

    @field_validator("public_url")
    @classmethod
    def _public_https(cls, value: str | None) -> str | None:
        return None if value is None else check_https_url(value, "the public URL", allow_path=False)

    @model_validator(mode="after")
    def _public_url_with_oidc(self) -> ConsoleConfig:
        if self.oidc is not None and self.public_url is None:
            raise ValueError("console.public_url is needed with console.oidc (the provider's redirect back goes there)")
        return self
