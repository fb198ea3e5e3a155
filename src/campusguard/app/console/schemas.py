"""Request and response bodies of the console API (they also make up its OpenAPI schema).

Requests forbid unknown fields and bound every string and list, so a malformed body is a 422 that
names the field, never a 500. Zones and lines reuse the watch config's own models (the same
validation as the YAML file).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from campusguard.app.config import LineConfig, ZoneConfig
from campusguard.app.config.privacy import PrivacyConfig
from campusguard.app.config.rules import RuleConfig
from campusguard.app.console.identity.users import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, AuditEntry
from campusguard.app.events.review import MAX_BULK_REVIEW

__all__ = [
    "EVENT_ID_PATTERN",
    "USER_NAME_PATTERN",
    "LoginRequest",
    "LoginResponse",
    "UserOut",
    "AccountOut",
    "UserCreate",
    "UserUpdate",
    "PasswordChange",
    "TokenCreate",
    "TokenOut",
    "NoteRequest",
    "EventOut",
    "KeepRequest",
    "EventPage",
    "CameraStatusOut",
    "CameraHealthOut",
    "HealthPage",
    "ZonesBody",
    "AuditPage",
    "AuditFacets",
    "BulkReviewRequest",
    "BulkReviewOut",
    "OpenIncidents",
    "Health",
    "Ready",
    "Responses",
]

EVENT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
USER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
RoleName = Literal["viewer", "operator", "admin"]
Responses = dict[int | str, dict[str, Any]]  # the `responses=` of a route (OpenAPI)


class _Request(BaseModel):
    """A request body: unknown fields are errors; booleans are JSON booleans only (``"yes"`` and ``1``
    are not), and the shapes' coordinates numbers only (`campusguard.app.config.zones.Coordinate`)."""

    model_config = ConfigDict(extra="forbid")


class LoginRequest(_Request):
    username: str = Field(..., min_length=1, max_length=64, description="User name.")
    password: str = Field(..., min_length=1, max_length=MAX_PASSWORD_LENGTH, description="Password.")


class UserOut(BaseModel):
    name: str
    role: RoleName
    created_at: str | None = None


class AccountOut(UserOut):
    """A user as the users page lists it: where it signs in and when it last did."""

    source: Literal["local", "oidc"] = Field(
        ..., description="`local`: a console password; `oidc`: signs in through the identity provider (no password)."
    )
    issuer: str | None = Field(None, description="The provider's issuer (`oidc` accounts).")
    subject: str | None = Field(None, description="The provider's subject (`sub`) of the person (`oidc` accounts).")
    groups: list[str] = Field(
        default_factory=list,
        description="The role claim's values that mapped to the role at the last sign-in (`oidc` accounts).",
    )
    last_sign_in_at: str | None = Field(None, description="UTC time of the last sign-in; none if never.")


class LoginResponse(BaseModel):
    token: str = Field(..., description="Session token; also usable as `Authorization: Bearer <token>`.")
    csrf: str = Field(..., description="Send as `X-CSRF-Token` on cookie-authenticated writes.")
    user: UserOut


class UserCreate(_Request):
    name: str = Field(..., pattern=USER_NAME_PATTERN, description="1-64 letters, digits, `_ . @ -`.")
    role: RoleName = Field(..., description="viewer < operator < admin.")
    password: str = Field(..., min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)


class UserUpdate(_Request):
    role: RoleName | None = Field(None, description="New role.")
    password: str | None = Field(
        None,
        min_length=MIN_PASSWORD_LENGTH,
        max_length=MAX_PASSWORD_LENGTH,
        description="New password (ends their sessions).",
    )


class PasswordChange(_Request):
    current: str = Field(..., min_length=1, max_length=MAX_PASSWORD_LENGTH, description="The present password.")
    new: str = Field(..., min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH, description="The new one.")


class TokenCreate(_Request):
    label: str | None = Field(None, max_length=120, description="What the token is for.")
    days: Annotated[int, Strict()] = Field(365, ge=1, le=3650, description="Days until it expires (a JSON integer).")


class TokenOut(BaseModel):
    token: str = Field(..., description="Shown once; only its hash is stored.")
    user: str
    expires_days: int


class TokenInfoOut(BaseModel):
    id: str = Field(
        ..., description="The token's id (16 hex digits of its SHA-256); DELETE /api/v1/tokens/{id} revokes it."
    )
    user: str
    label: str | None = None
    created_at: str
    expires_at: str


class NoteRequest(_Request):
    note: str = Field("", max_length=2000, description="What was done or found.")


class ResolveRequest(NoteRequest):
    outcome: Literal["confirmed", "false_alarm", "nuisance"] | None = Field(
        None,
        description="What was found: confirmed (a real incident), false_alarm (nothing there: the detector or "
        "the rule was wrong) or nuisance (real but harmless: staff on duty, an animal, a delivery).",
    )


class KeepRequest(_Request):
    kept: Annotated[bool, Strict()] = Field(
        True,
        description="True: never delete this incident nor its media (retention); false: undo. A JSON boolean only.",
    )


class EventOut(BaseModel):
    """One incident with its review state (`campusguard.app.events.records.EventRecord.to_dict`) and media URLs."""

    id: str
    camera: str
    rule: str
    kind: str
    zone: str
    state: Literal["open", "acknowledged", "resolved"]
    open: bool = Field(..., description="The incident is still going on (not ended by the pipeline).")
    started_at: str | None
    ended_at: str | None
    start_s: float
    end_s: float | None
    track_id: int | None
    tracker_ids: list[int]
    class_names: list[str]
    count: int | None
    direction: str | None
    details: dict[str, Any]
    has_snapshot: bool
    outcome: Literal["confirmed", "false_alarm", "nuisance"] | None = Field(
        None, description="What the operator who resolved it found (none: not recorded)."
    )
    outcome_by: str | None = None
    outcome_at: str | None = None
    media_blur: str | None = Field(
        None,
        description="The camera's blur when the incident's media were made (none, persons, faces); "
        "null: unknown (treated as the strictest).",
    )
    acknowledged_by: str | None
    acknowledged_at: str | None
    resolved_by: str | None
    resolved_at: str | None
    note: str | None
    kept: bool = False
    kept_by: str | None = None
    kept_at: str | None = None
    recorded_at: str
    updated_at: str
    snapshot_url: str | None
    clip_url: str | None
    snapshot_withheld: bool = Field(
        False,
        description="A snapshot exists but is withheld from you (a viewer: the camera blurs and no blurred copy exists).",
    )
    clip_withheld: bool = Field(
        False,
        description="A clip exists but is withheld from you (a viewer: the camera blurs and no blurred copy exists).",
    )
    checklist: dict[str, Any] | None = Field(
        None,
        description="The rule's checklist: `done`, `total` and `steps` (`index`, `step`, `checked`, `by`, `at`).",
    )


class StepRequest(_Request):
    """Tick or untick one step of the incident's checklist (its rule's `sop`)."""

    index: int = Field(..., ge=0, le=1000, description="The step's place in the rule's `sop` list (0 first).")
    checked: bool = Field(True, description="True ticks the step, false unticks it.")


class EvidenceRequest(_Request):
    """Export incidents as one signed evidence bundle."""

    ids: Annotated[list[Annotated[str, Field(pattern=EVENT_ID_PATTERN)]], Field(min_length=1, max_length=1000)] = Field(
        ..., description="Event ids (1 to 1000)."
    )
    reason: str = Field(
        ..., min_length=1, max_length=2000, description="Why the evidence is exported (who asked, what for)."
    )


class EventPage(BaseModel):
    items: list[EventOut]
    total: int = Field(..., description="All matching events (not just this page).")


HealthState = Literal["ok", "learning", "offline", "covered", "frozen", "blurred", "moved"]


class CameraHealthOut(BaseModel):
    """A camera's health (`campusguard.app.rules.camera_health.HealthStatus`): whether it can see, and why not."""

    state: HealthState = Field(
        ..., description="`ok`, `learning` (its usual view is being learned), or the problem of its open incident."
    )
    since_s: float | None = Field(None, description="When the problem began, on the camera's stream clock (seconds).")
    since: str | None = Field(
        None, description="When the problem began, wall clock (ISO 8601 UTC), from its incident; null until it is stored."
    )
    event_id: str | None = Field(None, description="The open health incident's id.")
    measures: dict[str, float] = Field(
        default_factory=dict,
        description="The latest sample's measures (brightness, changed, covered_area, sharpness_ratio, similarity, ...).",
    )
    reference_made_at: str | None = Field(None, description="When the reference view was learned or accepted (ISO 8601).")
    reference_accepted_by: str | None = Field(None, description="Who accepted it in the console; null when learned.")
    zones_on_old_view: list[str] = Field(
        default_factory=list,
        description="Zones drawn on the view before the last accepted one: to check, until the camera's zones are saved.",
    )


class CameraStatusOut(BaseModel):
    name: str
    state: Literal["starting", "live", "reconnecting", "offline", "stopped", "failed", "unassigned"] = Field(
        description="``unassigned``: with nodes, no node runs the camera now (between a node's death and the takeover)."
    )
    input_fps: float
    processed_fps: float
    dropped_frames: int
    reconnects: int
    last_frame_time: float | None = Field(None, description="Unix seconds of the last frame read.")
    width: int | None = None
    height: int | None = None
    node: str | None = Field(
        None, description="With nodes (serve --node): the node that runs the camera now; null without nodes or when none does."
    )
    health: CameraHealthOut | None = Field(
        None,
        description="Whether the camera can see (camera health); null when its health is off, it is not running yet, "
        "or the cameras run on Ray (whose groups do not report it).",
    )


def _finite(points: list[tuple[float, float]]) -> bool:
    return all(math.isfinite(v) for p in points for v in p)


class ZonesBody(_Request):
    """A camera's zones, lines, rules and privacy section, in the config file's form (the same models).

    In a request, ``zones`` and ``lines`` default to none; without ``rules`` or ``privacy`` the
    camera keeps the ones it has."""

    zones: Annotated[list[ZoneConfig], Field(max_length=64)] = Field(default_factory=list)
    lines: Annotated[list[LineConfig], Field(max_length=64)] = Field(default_factory=list)
    rules: Annotated[list[RuleConfig], Field(max_length=128)] = Field(default_factory=list)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)

    @model_validator(mode="after")
    def _finite_coordinates(self) -> ZonesBody:
        shapes = [z.polygon for z in self.zones] + [ln.points for ln in self.lines]
        shapes += [m.polygon for m in self.privacy.masks]
        if not all(_finite(points) for points in shapes):
            raise ValueError("coordinates must be finite numbers")
        return self


class AuditPage(BaseModel):
    items: list[AuditEntry]
    total: int = Field(..., description="All entries matching the filters (not just this page).")


class AuditFacets(BaseModel):
    users: list[str] = Field(..., description="Users named in the audit log.")
    actions: list[str] = Field(..., description="Actions recorded in the audit log.")


# review at scale: bulk acknowledge / resolve and the wall's open-incident markers ------------------
MAX_BULK_IDS = MAX_BULK_REVIEW  # the store reviews this many in one transaction


class BulkReviewRequest(_Request):
    """Acknowledge or resolve several incidents with one note."""

    ids: Annotated[
        list[Annotated[str, Field(pattern=EVENT_ID_PATTERN)]], Field(min_length=1, max_length=MAX_BULK_IDS)
    ] = Field(..., description=f"Event ids (1 to {MAX_BULK_IDS}; a repeated id counts once).")
    action: Literal["acknowledge", "resolve"] = Field(..., description="What to do with each incident.")
    note: str = Field("", max_length=2000, description="One note for all of them (empty keeps each stored note).")
    outcome: Literal["confirmed", "false_alarm", "nuisance"] | None = Field(
        None, description="With resolve: what was found, recorded on each incident resolved (confirmed, false_alarm, nuisance)."
    )


class BulkReviewOut(BaseModel):
    updated: list[EventOut] = Field(..., description="The incidents changed, as they are now.")
    missing: list[str] = Field(..., description="Ids of no incident (nothing done).")
    conflicts: dict[str, str] = Field(
        ..., description="Id -> current state, for incidents the action does not apply to (nothing done)."
    )


class HealthProblemOut(BaseModel):
    """One camera health incident, as the health page lists it."""

    id: str
    problem: str = Field(..., description="offline, covered, frozen, blurred or moved.")
    started_at: str | None
    ended_at: str | None
    duration_s: float | None = Field(
        None, description="How long the problem lasted, from its onset to the incident's end (null while it goes on)."
    )
    open: bool = Field(..., description="Still going on.")
    state: Literal["open", "acknowledged", "resolved"] = Field(..., description="Its review state.")
    measures: dict[str, Any] = Field(default_factory=dict, description="The measures that decided it.")


class CameraHealthRow(BaseModel):
    """One camera on the health page: its state now and its recent health incidents."""

    name: str
    camera_state: str = Field(..., description="The reader's state (live, offline, reconnecting, ...).")
    health: CameraHealthOut | None
    problems: list[HealthProblemOut] = Field(..., description="Its latest health incidents in the period, newest first.")
    problems_total: int = Field(..., description="All its health incidents in the period.")


class HealthPage(BaseModel):
    """Every camera's health and recent health incidents."""

    days: int = Field(..., description="The period, in days back from now.")
    cameras: list[CameraHealthRow]


class OpenIncidents(BaseModel):
    cameras: dict[str, int] = Field(..., description="Camera -> open (not yet acknowledged) incidents; 0s left out.")
    total: int


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Ready(BaseModel):
    ready: bool
    problems: list[str] = Field(
        default_factory=list,
        description="Why not ready (signed-in callers only): the cameras without a recent frame, ``disk full`` "
        "(with a full volume's path, free bytes and error only for an operator's or admin's token or session).",
    )
    mqtt_connected: dict[str, bool] | None = None  # each MQTT sink's broker: connected? (alerts wait in the outbox)
    cameras_down: dict[str, str] | None = Field(
        None,
        description="The cameras that are not live and their state (offline, reconnecting, starting, stopped, "
        "failed); the console is ready while some camera is live.",
    )
