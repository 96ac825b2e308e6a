"""pytest plugin: a ``backend`` fixture that runs a test once per installed backend.

Opt-in: a project loads it from its top-level ``conftest.py`` with
``pytest_plugins = ["rlgraph.tests.pytest_plugin"]`` (rlgraph's own ``tests/conftest.py`` does). It is not
registered as a ``pytest11`` entry point, so it never touches the test suites of other projects in the same
environment. A test taking ``backend`` then runs for "tf" and "pytorch"; ``--backend tf`` (or
``$RLGRAPH_TEST_BACKENDS=tf``) restricts the run. ``--backend jax`` runs them on JAX, which is not in the default
set yet (issue 34: its own tests are tests/test_jax_*.py; a graph function without a JAX body is refused with the
line naming issue 34).
"""
import os

import pytest

from rlgraph.utils.backend import BACKENDS, backend_available, normalize_backend


def pytest_addoption(parser):
    parser.addoption("--backend", action="append", default=None,
                     help="rlgraph backend(s) to run backend-parametrized tests on (tf, pytorch, jax; "
                          "default tf and pytorch).")


def _selected(config):
    chosen = config.getoption("--backend", default=None)
    if not chosen and os.environ.get("RLGRAPH_TEST_BACKENDS"):
        chosen = os.environ["RLGRAPH_TEST_BACKENDS"].split(",")
    return [normalize_backend(b) for b in chosen] if chosen else list(BACKENDS)


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", _selected(metafunc.config), indirect=True)


@pytest.fixture
def backend(request):
    """The backend name ("tf", "pytorch" or "jax"); skips the test if that backend is not installed."""
    name = request.param
    if not backend_available(name):
        pytest.skip(f"backend {name} is not installed")
    return name
