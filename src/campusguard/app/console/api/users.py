"""Users and their API tokens (admin only)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status

from campusguard.app.console.identity.auth import audit, console_state, require_role
from campusguard.app.console.schemas import (
    USER_NAME_PATTERN,
    AccountOut,
    TokenCreate,
    TokenInfoOut,
    TokenOut,
    UserCreate,
    UserOut,
    UserUpdate,
)
from campusguard.errors import InvalidInputError

router = APIRouter(tags=["users"], dependencies=[Depends(require_role("admin"))])
UserName = Annotated[str, Path(pattern=USER_NAME_PATTERN)]


@router.get("/users")
def list_users(request: Request) -> list[AccountOut]:
    """Every user, local or made by a campus sign-in: role, where it signs in (a console password, or the
    provider's issuer and subject with the groups that mapped to its role) and when it last signed in."""
    return [
        AccountOut(
            name=a.name,
            role=a.role,
            created_at=a.created_at,
            source=a.source,
            issuer=a.issuer,
            subject=a.subject,
            groups=list(a.groups),
            last_sign_in_at=a.last_sign_in_at,
        )
        for a in console_state(request).users.list_accounts()
    ]


@router.post("/users", status_code=status.HTTP_201_CREATED, responses={409: {"description": "Name taken."}})
def add_user(body: UserCreate, request: Request) -> UserOut:
    """Create a user."""
    users = console_state(request).users
    if users.get_user(body.name) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"user {body.name!r} already exists")
    try:
        user = users.add_user(body.name, body.role, body.password)
    except InvalidInputError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    audit(request, "user.add", user.name, role=user.role)
    return UserOut(name=user.name, role=user.role, created_at=user.created_at)


@router.delete(
    "/users/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "No such user."}, 409: {"description": "The last admin."}},
)
def remove_user(name: UserName, request: Request) -> None:
    """Remove a user and every session and token of theirs."""
    try:
        console_state(request).users.remove_user(name)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user {name!r}") from exc
    except InvalidInputError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    audit(request, "user.remove", name)


@router.patch(
    "/users/{name}",
    responses={
        404: {"description": "No such user."},
        409: {"description": "Demoting the last admin, or a password for an account of the identity provider."},
    },
)
def update_user(name: UserName, body: UserUpdate, request: Request) -> UserOut:
    """Change a user's role and/or password (a new password ends their login sessions). An account made
    by a campus sign-in has no password (409); its role is set again from the provider at its next sign-in."""
    users = console_state(request).users
    issuer = users.external_issuer(name) if body.password is not None else None
    if issuer is not None:  # refused before any change, so a role sent with it is not half applied
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"user {name!r} signs in through {issuer} and has no console password; change it at the identity provider",
        )
    try:
        if body.role is not None:
            users.set_role(name, body.role)
        if body.password is not None:
            users.set_password(name, body.password)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user {name!r}") from exc
    except InvalidInputError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    user = users.get_user(name)
    if user is None:  # removed meanwhile
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user {name!r}")
    audit(request, "user.update", name, role=body.role, password_changed=body.password is not None)
    return UserOut(name=user.name, role=user.role, created_at=user.created_at)


@router.post(
    "/users/{name}/tokens", status_code=status.HTTP_201_CREATED, responses={404: {"description": "No such user."}}
)
def create_token(name: UserName, body: TokenCreate, request: Request) -> TokenOut:
    """Create an API token for a user (for integrations); it is shown once."""
    try:
        token = console_state(request).users.create_api_token(name, label=body.label, ttl=timedelta(days=body.days))
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user {name!r}") from exc
    audit(request, "token.create", name, label=body.label, days=body.days)
    return TokenOut(token=token, user=name, expires_days=body.days)


@router.get("/tokens")
def list_tokens(request: Request, user: str | None = None) -> list[TokenInfoOut]:
    """The API tokens that are still valid (of ``user``, or of everyone), newest first: id, owner,
    label and dates, never the token."""
    return [TokenInfoOut(**t.__dict__) for t in console_state(request).users.api_tokens(user)]


@router.delete(
    "/tokens/{token_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "No API token has this id."}},
)
def revoke_token(token_id: Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")], request: Request) -> None:
    """Revoke an API token by its id (`GET /api/v1/tokens`): it stops working at once."""
    revoked = console_state(request).users.revoke_api_token(token_id)
    if revoked is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no API token {token_id!r}")
    audit(request, "token.revoke", revoked.user, token=token_id, label=revoked.label)
