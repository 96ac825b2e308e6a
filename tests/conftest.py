"""Shared test set-up: quiet TensorFlow, seed numpy's default sampling generator."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

from rlgraph.spaces.space import set_sample_seed  # noqa: E402

# rlgraph's pytest plugin (the ``backend`` fixture, ``--backend``) is opt-in; this suite opts in.
pytest_plugins = ["rlgraph.tests.pytest_plugin"]


@pytest.fixture(autouse=True)
def _seed_space_sampling():
    set_sample_seed(1)
    yield
