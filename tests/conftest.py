"""Shared pytest configuration: Hypothesis profiles ``ci`` (selected by ``CI=true``) and ``dev``."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=50)
settings.register_profile("dev", deadline=None, max_examples=30)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")
