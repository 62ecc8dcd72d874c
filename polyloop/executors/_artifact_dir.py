"""A directory of artifacts named by their content: where an executor saves the rich outputs
(images, HTML, JSON, …) that do not belong in an observation's text.

A file's name is the SHA-256 of its bytes plus an extension chosen from the MIME type by a
fixed table, so nothing the executed code sends can choose a name or a path (no ``../``), the
same content is one file, and a file that exists is never written again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ArtifactDirectory", "SavedArtifact", "checked_artifacts_dir", "extension_for"]

_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
    "image/svg+xml": ".svg",
    "text/html": ".html",
    "text/markdown": ".md",
    "text/latex": ".tex",
    "text/csv": ".csv",
    "text/css": ".css",
    "text/javascript": ".js",
    "application/javascript": ".js",
    "application/json": ".json",
    "application/geo+json": ".geojson",
    "application/pdf": ".pdf",
    "audio/wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "video/mp4": ".mp4",
    "video/webm": ".webm",
}


def extension_for(mime: str, *, binary: bool) -> str:
    """The file extension for ``mime`` (from a fixed table, never from the text of ``mime``):
    ``.json``/``.xml`` for a ``+json``/``+xml`` suffix, else ``.bin`` or ``.txt``."""
    known = _EXTENSIONS.get(mime.lower())
    if known is not None:
        return known
    if mime.endswith("+json"):
        return ".json"
    if mime.endswith("+xml"):
        return ".xml"
    return ".bin" if binary else ".txt"


def checked_artifacts_dir(value: str | os.PathLike[str] | None) -> Path | None:
    """``value`` as an absolute directory path, created if missing; ``None`` stays ``None``.

    ``TypeError`` for anything but a ``str`` or ``os.PathLike[str]``; ``ValueError`` for an empty
    path, a path that is a file (or lies under one), or one that cannot be created.
    """
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or isinstance(value, bytes):
        raise TypeError(
            f"artifacts_dir must be a str or os.PathLike[str], got {type(value).__name__}"
        )
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise TypeError(f"artifacts_dir must be a str path, got {type(raw).__name__}")
    if not raw.strip():
        raise ValueError("artifacts_dir must be a non-empty path")
    try:
        path = Path(raw).absolute()  # a later chdir does not move it
        is_file = path.exists() and not path.is_dir()
        if not is_file:
            path.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # NUL byte, lone surrogate, permission, a file above
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"artifacts_dir {raw!r} cannot be used as a directory: {reason}") from None
    if is_file:
        raise ValueError(f"artifacts_dir {raw!r} is a file, not a directory")
    return path


def _create(path: Path) -> int:
    """A new file's descriptor. ``O_EXCL``: never through a link planted there; mode 0o666 less
    the umask, as any file the user's programs create (mkstemp's 0o600 would hide it from a
    web server showing the plots, say)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)


@dataclass(frozen=True)
class SavedArtifact:
    """A file in the artifacts directory: its name (no directory part) and its size in bytes."""

    name: str
    size: int


class ArtifactDirectory:
    """Writes content to ``path`` under the name of its SHA-256, once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, content: bytes, extension: str) -> SavedArtifact:
        """The file holding ``content``, written now unless it exists; ``OSError`` when it
        cannot be written (disk full, the directory removed and not creatable, …).

        The bytes go to a temporary file first and are renamed into place, so a reader never
        sees a partial file and two writers of the same content leave one whole file.
        """
        name = hashlib.sha256(content).hexdigest() + extension
        target = self.path / name
        if target.exists():
            return SavedArtifact(name, len(content))
        temporary = self.path / f".partial-{secrets.token_hex(8)}{extension}"
        try:
            fd = _create(temporary)
        except FileNotFoundError:  # the directory was removed since construction: made again
            self.path.mkdir(parents=True, exist_ok=True)
            fd = _create(temporary)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(content)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return SavedArtifact(name, len(content))
