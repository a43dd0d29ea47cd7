"""Op definitions: importing this package registers every op (explicit imports, no scanning)."""
from __future__ import annotations
