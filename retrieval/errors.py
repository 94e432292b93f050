"""Errors that say what went wrong, with which file, and what to do about it."""

from __future__ import annotations


class RetrievalError(Exception):
    """Base class for retrieval errors: a message that names the problem and the fix."""


class IngestError(RetrievalError):
    """One file could not be turned into units. Indexing goes on with the rest."""

    def __init__(self, path: str, reason: str, fix: str = "") -> None:
        self.path = str(path)
        self.reason = reason
        self.fix = fix
        msg = f"{self.path}: {reason}"
        if fix:
            msg += f" ({fix})"
        super().__init__(msg)


class IndexOpenError(RetrievalError):
    """The index folder is missing, belongs to another embedder, or cannot be opened."""


def missing_dependency(package: str, extra: str | None = None, purpose: str = "") -> ImportError:
    """An ImportError with the install hint for an optional heavy dependency."""
    hint = f"pip install 'vimrag[{extra}]'" if extra else f"pip install {package}"
    what = f" for {purpose}" if purpose else ""
    return ImportError(f"{package} is needed{what} but is not installed; run: {hint}")
