"""pdlite's exceptions: every error a user can trigger derives from PdliteError."""
from __future__ import annotations


class PdliteError(Exception):
    """Base class of every pdlite error."""


class ModelFormatError(PdliteError):
    """A model or params file is missing, truncated, corrupt or inconsistent."""


class UnsupportedOpError(PdliteError):
    """The program holds ops that no registered kernel (for the valid places) can run."""


class InputError(PdliteError, ValueError):
    """A feed is missing or has the wrong shape or dtype."""


class KernelError(PdliteError):
    """A kernel failed; the message names the op, its inputs' shapes and dtypes."""


class GraphError(PdliteError):
    """An invalid graph edit or a broken graph invariant (found by lint)."""


class ConfigError(PdliteError, ValueError):
    """An invalid configuration value."""


class MissingDependencyError(PdliteError, ImportError):
    """An optional package is not installed; the message names the pip extra that installs it."""
