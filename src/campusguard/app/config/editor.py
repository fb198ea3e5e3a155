"""`ConfigEditor`: one camera's editable section of a config file, read, checked and rewritten on disk.

The console's zone editor saves through it (`campusguard.app.console.runtime.ConsoleRuntime.save_zones`
adds the live apply and, with nodes, the publishing); a command-line tool can save through it too,
with nothing running. What it keeps:

- the file as last read or written (`FileState`): its revision (`config_revision`), its mapping and
  its validated cameras, read again only when the bytes on disk changed;
- each camera's revision (`camera_revision`), the zones API's ``ETag``: a save whose ``If-Match`` names
  another is refused (`RevisionConflictError`); changes to other cameras are no conflict;
- the save itself: the file is read as it is now, only this camera's section is replaced (every other
  section, saved by another admin or edited by hand, is written back as it is on disk), the result is
  validated by the same models as the file, and written durably with the previous version kept as
  ``.bak`` and among the last `REVISIONS_KEPT` revisions. When another process rewrites the file
  between the read and the write, the save starts over on the new file (`SAVE_ATTEMPTS` times).

Thread-safe: `lock` (re-entrant) is held by every read and save; a caller that must do more as one
step with a save (apply it to a running pipeline) holds it around both.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from campusguard.app.config import YAML_LOADER, CameraConfig, LoadedConfig, dump_config_yaml, validate_config
from campusguard.app.config.revisions import RevisionConflictError, camera_revision, config_revision, keep_revision
from campusguard.app.infra.durable import replace_durably
from campusguard.errors import CampusGuardError, ConfigError

__all__ = [
    "EDITABLE_PARTS",
    "SAVE_ATTEMPTS",
    "CameraNotInFileError",
    "ConfigEditor",
    "ConfigSaveError",
    "FileState",
    "Prepare",
    "ZonesSave",
    "camera_parts",
    "check_edit",
    "editable_state",
]

EDITABLE_PARTS = ("zones", "lines", "rules", "privacy")
"""The parts of a camera's section an edit may replace."""

SAVE_ATTEMPTS = 3
"""Times a save starts over when another process rewrote the config file while it was made."""

_SENT = "<edit>"  # where parse errors of an edit point: replaced by the body's own field names

Prepare = Callable[[LoadedConfig, str], Callable[[], None]]
"""``(config as it will be written, its YAML text) -> apply``: checks the edit against whatever runs the
camera (raising `ConfigError` refuses the save before anything is written) and returns what applies it,
called once the file is written."""


class _FileChangedError(Exception):
    """The config file changed on disk between a save's read and its write (`ConfigEditor._write`)."""


class ConfigSaveError(CampusGuardError):
    """The config file could not be read back or rewritten (a server problem, not the request's);
    the message names the file, for the server's log only."""


class CameraNotInFileError(ConfigSaveError):
    """The config file no longer names the camera being saved (renamed or removed by hand): nothing saved;
    a restart takes the file as it is (HTTP 409, not a server fault)."""


@dataclasses.dataclass(frozen=True)
class ZonesSave:
    """What a save did: the camera's zones now and their revision (`camera_revision`), whether it wrote,
    and the camera's zones as they were in the file just before (for the audit). ``config`` and
    ``parts`` are the config as written and the camera's parts in it (`camera_parts`); None when
    nothing was written."""

    zones: dict[str, Any]
    revision: str
    changed: bool
    before: dict[str, Any]
    config: LoadedConfig | None = dataclasses.field(default=None, repr=False, compare=False)
    parts: dict[str, Any] | None = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class FileState:
    """The config file at one revision: its mapping (as read) and its validated cameras; ``views`` and
    ``parts`` remember, per camera, what `ConfigEditor.camera_view` and `camera_parts` make of it (a
    400 KB zones section takes a tenth of a second to dump and hash, and every GET and PUT asks)."""

    revision: str
    data: dict[str, Any]
    cameras: list[CameraConfig]
    views: dict[str, tuple[dict[str, Any], str]] = dataclasses.field(default_factory=dict)
    parts: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def editable_state(cam: CameraConfig) -> dict[str, Any]:
    """A camera's ``{"zones", "lines", "rules", "privacy"}`` as the zones API shows them (defaults
    filled in, every rule with its name: `RuleConfigBase.display_name` where the file gives none);
    also what its revision (`camera_revision`) is computed from."""
    return {
        "zones": [z.model_dump(mode="json") for z in cam.zones],
        "lines": [ln.model_dump(mode="json") for ln in cam.lines],
        "rules": [{**r.model_dump(mode="json"), "name": r.display_name()} for r in cam.rules],
        "privacy": cam.privacy.model_dump(mode="json"),
    }


def camera_parts(cam: CameraConfig) -> dict[str, Any]:
    """A camera's editable parts as the editor writes them: defaults left out, every rule named
    (``name`` first, then ``kind``), no ``privacy`` section when it has nothing."""
    parts: dict[str, Any] = {
        "zones": [z.model_dump(mode="json", exclude_defaults=True) for z in cam.zones],
        "lines": [ln.model_dump(mode="json", exclude_defaults=True) for ln in cam.lines],
        "rules": [
            {"name": r.display_name(), "kind": r.kind, **r.model_dump(mode="json", exclude_defaults=True)}
            for r in cam.rules
        ],
    }
    privacy = cam.privacy.model_dump(mode="json", exclude_defaults=True)
    if privacy:
        parts["privacy"] = privacy
    return parts


def check_edit(body: object) -> dict[str, Any]:
    """``body`` if it is an edit: a mapping of some of `EDITABLE_PARTS`.

    Raises:
        ConfigError: it is not a mapping, or names another key.
    """
    if not isinstance(body, dict):
        raise ConfigError(f"the body must be an object with {', '.join(map(repr, EDITABLE_PARTS))}")
    unknown = sorted(set(body) - set(EDITABLE_PARTS))
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r}; expected {', '.join(map(repr, EDITABLE_PARTS))}")
    return body


def _camera_index(data: Mapping[str, Any], camera: str) -> int | None:
    return next((i for i, c in enumerate(data["cameras"]) if isinstance(c, dict) and c.get("id") == camera), None)


class ConfigEditor:
    """Reads and rewrites the camera sections of the config file at ``path`` (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self._state: FileState | None = None  # the file as last read or written (`file_state`)

    def file_state(self) -> FileState:
        """The config file as it is now: its revision, its mapping and its cameras (parsed again only
        when the file changed since this editor last read or wrote it).

        Raises:
            ConfigSaveError: the file cannot be read, or has no cameras list.
        """
        with self.lock:
            try:
                raw = self.path.read_bytes()
            except OSError as exc:
                raise ConfigSaveError(f"{self.path}: cannot read the config file: {exc.__class__.__name__}") from None
            revision = config_revision(raw)
            state = self._state
            if state is not None and state.revision == revision:
                return state
            try:
                text = raw.decode("utf-8")
                data = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - the safe loader
            except (UnicodeDecodeError, yaml.YAMLError) as exc:
                raise ConfigSaveError(f"{self.path}: cannot read the config file: {exc.__class__.__name__}") from None
            if not isinstance(data, dict) or not isinstance(data.get("cameras"), list):
                raise ConfigSaveError(f"{self.path}: the config file no longer has a cameras list")
            try:
                cameras = list(validate_config(data, str(self.path), text).config.cameras)
            except ConfigError:
                cameras = []  # edited by hand into an invalid file: the caller shows the running config
            state = self._state = FileState(revision, data, cameras)
            return state

    def camera_view(self, camera: str, running: LoadedConfig) -> tuple[dict[str, Any], str]:
        """The camera's editable state as the file on disk has it now, and its revision (`camera_revision`);
        where the file no longer validates or no longer names the camera, its section in ``running`` (the
        config it runs with; a save then says why it cannot be made).

        Raises:
            KeyError: neither the file nor ``running`` names the camera.
            ConfigSaveError: the file cannot be read.
        """
        with self.lock:
            return self._view(self.file_state(), camera, running)

    def _view(self, state: FileState, camera: str, running: LoadedConfig) -> tuple[dict[str, Any], str]:
        known = state.views.get(camera)
        if known is not None:
            return known
        cam = next((c for c in state.cameras if c.id == camera), None)
        if cam is None:
            running_cam = next((c for c in running.config.cameras if c.id == camera), None)
            if running_cam is None:
                raise KeyError(camera)
            zones = editable_state(running_cam)
            return zones, camera_revision(camera, zones)  # the running camera's: not the file's to keep
        zones = editable_state(cam)
        view = state.views[camera] = (zones, camera_revision(camera, zones))
        return view

    def edited(self, camera: str, body: dict[str, Any]) -> LoadedConfig:
        """The file as it is now with ``body`` over the camera's section, validated; nothing written.

        Raises:
            KeyError: the file names no such camera.
            ConfigError: the edit is invalid (the message names the field of the body).
            ConfigSaveError: the file cannot be read.
        """
        state = self.file_state()
        data = {**state.data, "cameras": list(state.data["cameras"])}
        index = _camera_index(data, camera)
        if index is None:
            raise KeyError(camera)
        data["cameras"][index] = {**data["cameras"][index], **body}
        checked = validate_config(data, _SENT)
        return LoadedConfig(checked.config, str(self.path), None, None)

    def save(
        self,
        camera: str,
        body: dict[str, Any],
        if_match: str | Collection[str] | None,
        running: LoadedConfig,
        *,
        applied: Mapping[str, Any] | None = None,
        prepare: Prepare | None = None,
    ) -> ZonesSave:
        """Replace the camera's section's `EDITABLE_PARTS` named in ``body`` (a missing key keeps what
        the camera has) and rewrite the file. Every rule is written with its name (generated as
        ``<kind>:<zone or line>`` where it has none). A save that changes nothing (the section on
        disk, and ``applied``, are already what the edit asks for) writes nothing.

        Args:
            camera: the camera's id.
            body: the edit (`check_edit`).
            if_match: the camera's revision (or revisions) the edit was made on (`camera_view`);
                ``None``: any.
            running: the config the camera runs with: its section stands in where the file no longer
                has the camera, and its ``outputs`` are the written config's (the runtime's own folders).
            applied: the camera's parts as its pipeline was last given them (`camera_parts`); None
                where nothing runs it.
            prepare: checks the edit against what runs the camera, before anything is written, and
                returns what applies it once written (`Prepare`).

        Raises:
            KeyError: neither the file nor ``running`` names the camera.
            RevisionConflictError: the camera's section is no longer at ``if_match``.
            ConfigError: the edit is invalid; the message names the field of the body
                (``rules[0].zone: ...``) and never the config's path.
            CameraNotInFileError: the file no longer names the camera.
            ConfigSaveError: the file could not be read or rewritten, or kept changing; nothing changed.
        """
        accepted = None if if_match is None else {if_match} if isinstance(if_match, str) else set(if_match)
        with self.lock:
            for _ in range(SAVE_ATTEMPTS):
                try:
                    return self._save_once(camera, body, accepted, running, applied, prepare)
                except _FileChangedError:  # written by another process meanwhile: read it again, check again
                    continue
        raise ConfigSaveError(f"{self.path}: the config file kept changing while a zones edit was saved")

    def _save_once(
        self,
        camera: str,
        body: dict[str, Any],
        accepted: set[str] | None,
        running: LoadedConfig,
        applied: Mapping[str, Any] | None,
        prepare: Prepare | None,
    ) -> ZonesSave:
        """`save` on the file as it is now (not as this editor last wrote it)."""
        state = self.file_state()
        current, revision = self._view(state, camera, running)
        if accepted is not None and revision not in accepted:
            raise RevisionConflictError(revision, camera)
        index = _camera_index(state.data, camera)
        if index is None:
            raise CameraNotInFileError(
                f"{self.path}: the config file no longer names camera {camera!r} (edited by hand); "
                "restart the service to take the file as it is"
            )
        # shallow copies: only this camera's section is replaced, the rest is the file as read now
        data = {**state.data, "cameras": list(state.data["cameras"])}
        cam_data = data["cameras"][index] = dict(state.data["cameras"][index])
        file_cam = next((c for c in state.cameras if c.id == camera), None)
        before = state.parts.get(camera)
        if before is None and file_cam is not None:
            before = state.parts[camera] = camera_parts(file_cam)
        for key in EDITABLE_PARTS:
            if key in body:
                cam_data[key] = body[key]
        try:
            checked = validate_config(data, _SENT)
            new_cam = checked.config.cameras[index]
            for rule in new_cam.rules:  # written with its name, so later edits keep it
                rule.name = rule.display_name()
            after = camera_parts(new_cam)
            if after == before and after == applied:
                return ZonesSave(current, revision, changed=False, before=current)
            cam_data.update(after)
            if "privacy" not in after:
                cam_data.pop("privacy", None)
            text = dump_config_yaml(data)  # `checked` is this text's config: validated once, not again
            config = checked.config.model_copy(update={"outputs": running.config.outputs})
            loaded = LoadedConfig(config, str(self.path), None, text)
            apply = None if prepare is None else prepare(loaded, text)
        except ConfigError as exc:
            raise ConfigError(self._as_sent(str(exc), index)) from None
        file_revision = self._write(text, state)
        zones = editable_state(new_cam)
        view = (zones, camera_revision(camera, zones))
        self._state = FileState(
            file_revision, data, list(loaded.config.cameras), views={camera: view}, parts={camera: after}
        )
        if apply is not None:
            apply()
        return ZonesSave(*view, changed=True, before=current, config=loaded, parts=after)

    def _as_sent(self, message: str, index: int) -> str:
        """A config error as the editor shows it: the field of the sent body (``rules[0].zone: ...``),
        without the config's path, its line numbers or the camera's place in the file."""
        for where in (_SENT, str(self.path)):
            if message.startswith(where):
                message = re.sub(r"^:\d+", "", message[len(where) :]).removeprefix(": ")
                break
        message = message.removeprefix(f"cameras[{index}].")
        for path in {str(self.path), str(self.path.resolve()), str(self.path.parent)}:
            message = message.replace(path, "the config file")
        return message

    def _write(self, text: str, previous: FileState) -> str:
        """Write the config durably (`campusguard.app.infra.durable.replace_durably`); the previous
        file is kept as ``.bak`` and in the revisions folder (`keep_revision`); returns the new revision.

        Raises:
            _FileChangedError: the file is no longer at ``previous`` (another process wrote it since it
                was read): nothing written, so that edit is not lost.
            ConfigSaveError: the file could not be read or written.
        """
        path = self.path
        header = f"# rewritten by the CampusGuard console (zones/rules edit); previous version in {path.name}.bak\n"
        data = (header + text).encode("utf-8")
        try:
            old = path.read_bytes()
            if config_revision(old) != previous.revision:
                raise _FileChangedError(path)
            keep_revision(path, old, previous.revision)
            bak = path.with_name(path.name + ".bak")
            replace_durably(bak, old)
            os.chmod(bak, 0o600)
            replace_durably(path, data)
        except OSError as exc:
            raise ConfigSaveError(f"{path}: cannot rewrite the config file: {exc}") from None
        return config_revision(data)
