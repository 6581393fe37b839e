"""The model repository: what ``onnxbridge serve PATH`` serves, loaded, reloaded and unloaded.

``PATH`` is one of three layouts (detected in this order):

- a ``.onnx`` file: one model named after the file's stem;
- a bundle folder (``card.json`` and ``model.onnx``), or any folder with ``model.onnx`` directly
  in it: one model named after the folder;
- a repository folder: one sub-folder per model, named as the model. A model folder holds
  ``model.onnx`` (an unversioned model, served as version ``"1"``; a bundle folder works too)
  or numbered version folders ``1/``, ``2/``, ... each holding ``model.onnx``. Every version
  is served; a request without a version gets the highest.

Model names are checked (:data:`NAME_PATTERN`) and the resolved model folder must lie inside the
repository folder, so a name can never reach outside it (``..``, ``/``, symlinks out).

Loading replaces a model's entry in one assignment: a request in flight holds the entry it
started with and finishes on it. A model that fails to load is recorded with its reason
(readiness and the index report it) and the others keep serving; a failed *reload* leaves the
previously loaded versions serving.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from onnxbridge.errors import (
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    OnnxbridgeError,
    RepositoryError,
    first_line,
)
from onnxbridge.serve._model import ServedModel

__all__ = ["NAME_PATTERN", "ModelEntry", "ModelRepository", "RepositoryLayout"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_VERSION = re.compile(r"[0-9]{1,9}")
MODEL_FILE = "model.onnx"
RepositoryLayout = Literal["file", "bundle", "repository"]


@dataclass(frozen=True)
class ModelEntry:
    """A model's state: its loaded versions, or why it is not available.

    Attributes:
        name: the model name.
        state: ``READY``, ``UNAVAILABLE`` (failed to load) or ``UNLOADED``.
        versions: version → loaded model (empty unless some version loaded).
        default: the version a request without one gets (the highest).
        reason: why the last load failed, or ``""``.
    """

    name: str
    state: str
    versions: dict[str, ServedModel] = field(default_factory=dict)
    default: str | None = None
    reason: str = ""

    def index_rows(self) -> list[dict[str, str]]:
        if not self.versions:
            return [{"name": self.name, "version": "", "state": self.state, "reason": self.reason}]
        return [
            {"name": self.name, "version": v, "state": self.state, "reason": self.reason}
            for v in self.versions
        ]


def detect_layout(path: Path) -> RepositoryLayout:
    """Which layout ``path`` is.

    Raises:
        RepositoryError: it does not exist or is none of the three.
    """
    if path.is_file():
        if path.suffix != ".onnx":
            raise RepositoryError(
                f"{str(path)!r} is not a .onnx file; pass a .onnx file, a bundle folder or a "
                "model repository folder"
            )
        return "file"
    if path.is_dir():
        if (path / MODEL_FILE).is_file():  # a bundle (card.json beside it) or a bare model folder
            return "bundle"
        return "repository"
    raise RepositoryError(
        f"{str(path)!r} does not exist; pass a .onnx file, a bundle folder or a model "
        "repository folder (one sub-folder per model)"
    )


def check_model_name(name: str) -> str:
    """Return ``name`` if it may name a model.

    Raises:
        RepositoryError: it could reach outside the repository or is not a plain name.
    """
    if not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise RepositoryError(
            f"model name {name!r} is not allowed; use 1-128 letters, digits, '_', '-' and '.', "
            "starting with a letter or digit (no '/', no '..')"
        )
    return name


class ModelRepository:
    """The models served from one path.

    Args:
        path: a .onnx file, a bundle folder or a repository folder (see the module docstring).
        session_options: keyword arguments for ``Predictor`` (threads, spinning).

    Raises:
        RepositoryError: ``path`` does not exist or is not a usable layout.
    """

    def __init__(self, path: str | Path, *, session_options: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.layout = detect_layout(self.path)
        self.root = self.path.resolve() if self.layout == "repository" else self.path.parent
        self.session_options = dict(session_options or {})
        self._entries: dict[str, ModelEntry] = {}
        self._lock = threading.Lock()  # serialises loads; readers never take it

    # Names -------------------------------------------------------------------------------------
    def model_names(self) -> list[str]:
        """The models this path offers (loaded or not), sorted."""
        if self.layout == "file":
            return [self.path.stem]
        if self.layout == "bundle":
            return [self.path.resolve().name]
        names = set(self._entries.copy())
        for child in self.root.iterdir():
            if child.is_dir() and NAME_PATTERN.fullmatch(child.name) and ".." not in child.name:
                names.add(child.name)
        return sorted(names)

    def _files_of(self, name: str) -> dict[str, Path]:
        """Version → .onnx file of model ``name``.

        Raises:
            ModelNotFoundError: no such model in the repository.
            ModelLoadError: the model folder holds no model.
        """
        if self.layout != "repository":
            if name != self.model_names()[0]:
                raise ModelNotFoundError(
                    f"unknown model {name!r}; this server serves only {self.model_names()[0]!r}"
                )
            return {"1": self.path if self.layout == "file" else self.path / MODEL_FILE}
        check_model_name(name)
        folder = (self.root / name).resolve()
        if not folder.is_relative_to(self.root) or folder == self.root:
            raise RepositoryError(
                f"model {name!r} resolves to {str(folder)!r}, outside the repository "
                f"{str(self.root)!r}; model folders must lie inside it"
            )
        if not folder.is_dir():
            raise ModelNotFoundError(
                f"unknown model {name!r}: the repository {str(self.root)!r} has no folder of that "
                f"name; models there: {', '.join(self.model_names()) or 'none'}"
            )
        versions = {
            child.name: child / MODEL_FILE
            for child in folder.iterdir()
            if child.is_dir() and _VERSION.fullmatch(child.name)
        }
        if versions:
            for version, file in versions.items():
                if not file.resolve().is_relative_to(self.root):
                    raise RepositoryError(
                        f"model {name!r} version {version}: {str(file)!r} resolves outside the "
                        "repository; model files must lie inside it"
                    )
            return dict(sorted(versions.items(), key=lambda kv: int(kv[0])))
        file = folder / MODEL_FILE
        if file.is_file():
            if not file.resolve().is_relative_to(self.root):
                raise RepositoryError(
                    f"model {name!r}: {str(file)!r} resolves outside the repository; model files "
                    "must lie inside it"
                )
            return {"1": file}
        raise ModelLoadError(
            f"model {name!r}: folder {str(folder)!r} has neither {MODEL_FILE} nor numbered version "
            f"folders (1/{MODEL_FILE}, 2/{MODEL_FILE}, ...)"
        )

    # Loading -----------------------------------------------------------------------------------
    def load(self, name: str) -> ModelEntry:
        """(Re)load every version of model ``name``; blocking (run it off the event loop).

        Returns:
            The new entry (READY).

        Raises:
            ModelNotFoundError: no such model.
            RepositoryError: a name that is not allowed.
            ModelLoadError: a version failed to load; the error says which and why. The model's
                previous versions, if any, keep serving.
        """
        with self._lock:
            try:
                files = self._files_of(name)
                loaded = {}
                for version, file in files.items():
                    try:
                        loaded[version] = ServedModel(name, version, file, self.session_options)
                    except OnnxbridgeError as exc:
                        raise ModelLoadError(
                            f"model {name!r} version {version} failed to load: {exc}"
                        ) from exc
                    except Exception as exc:  # one model's surprise must not stop the others
                        raise ModelLoadError(
                            f"model {name!r} version {version} failed to load: unexpected "
                            f"{type(exc).__name__}: {first_line(exc)}"
                        ) from exc
            except ModelLoadError as exc:
                previous = self._entries.get(name)
                if previous is not None and previous.versions:
                    self._entries[name] = ModelEntry(
                        name,
                        previous.state,
                        previous.versions,
                        previous.default,
                        f"reload failed, previous versions still served: {first_line(exc)}",
                    )
                else:
                    self._entries[name] = ModelEntry(name, "UNAVAILABLE", reason=str(exc))
                raise
            versions = list(loaded)
            for model in loaded.values():
                model.metadata_json = model.metadata_answer(versions)
            entry = ModelEntry(name, "READY", loaded, versions[-1])
            self._entries[name] = entry  # one assignment: requests in flight keep the old entry
            return entry

    def load_all(self) -> list[ModelEntry]:
        """Load every model of the path; failures are recorded, not raised."""
        for name in self.model_names():
            try:
                self.load(name)
            except OnnxbridgeError:
                pass  # recorded in the entry; readiness and the index report it
        return list(self._entries.values())

    def unload(self, name: str) -> ModelEntry:
        """Stop serving model ``name``; requests in flight finish on it.

        Raises:
            ModelNotFoundError: the model is not loaded.
        """
        with self._lock:
            entry = self._entries.get(name)
            if entry is None or entry.state == "UNLOADED":
                raise ModelNotFoundError(
                    f"model {name!r} is not loaded; loaded models: "
                    f"{', '.join(self.loaded_names()) or 'none'}"
                )
            self._entries[name] = ModelEntry(name, "UNLOADED", reason="unloaded")
            return self._entries[name]

    # Lookup (hot path: no lock, one dict read) -------------------------------------------------
    # The loader thread may add an entry meanwhile: iterate over a copy (dict.copy is atomic).
    def loaded_names(self) -> list[str]:
        """Names of the models served now."""
        return sorted(n for n, e in self._entries.copy().items() if e.state == "READY")

    def entries(self) -> list[ModelEntry]:
        """Every model's entry, by name."""
        entries = self._entries.copy()
        return [entries[n] for n in sorted(entries)]

    def find_entry(self, name: str) -> ModelEntry | None:
        """The entry of model ``name``, or None."""
        return self._entries.get(name)

    def get_model(self, name: str, version: str | None = None) -> ServedModel:
        """The model version a request should run on.

        Raises:
            ModelNotFoundError: unknown (or unloaded) model, or unknown version.
            ModelNotReadyError: the model failed to load.
        """
        entry = self._entries.get(name)
        if entry is None or entry.state == "UNLOADED":
            raise ModelNotFoundError(
                f"unknown model {name!r}; models served: {', '.join(self.loaded_names()) or 'none'}"
                " (GET /v2/repository/index lists them all)"
            )
        if not entry.versions:
            raise ModelNotReadyError(
                f"model {name!r} is not ready: {entry.reason}; fix it and "
                f"POST /v2/repository/models/{name}/load"
            )
        model = entry.versions.get(version if version is not None else entry.default or "")
        if model is None:
            raise ModelNotFoundError(
                f"model {name!r} has no version {version!r}; versions served: "
                f"{', '.join(entry.versions)}"
            )
        return model
