"""Host target kernels: plain vectorised NumPy with Paddle's exact semantics.

Importing this package registers every host kernel (explicit imports, no scanning).
"""
from __future__ import annotations
