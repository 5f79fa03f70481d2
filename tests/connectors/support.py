"""What the tests of every connector package share.

``ENGINE[0]`` is the batch engine the tasks get: None (every batch a Spark job, as outside a
worker) or an in-process ``BatchEngine``, set by the ``engine`` fixture (``conftest.py``) for the
modules that use it.
"""
from __future__ import annotations

__all__ = ["ENGINE"]

ENGINE: list = [None]
