"""pytest plugin: a ``backend`` fixture that runs a test once per installed backend.

Opt-in: a project loads it from its top-level ``conftest.py`` with
``pytest_plugins = ["rlgraph.tests.pytest_plugin"]`` (rlgraph's own ``tests/conftest.py`` does). It is not
registered as a ``pytest11`` entry point, so it never touches the test suites of other projects in the same
environment.

Which backends a test taking ``backend`` runs on:

- ``--backend NAME`` (repeatable) or ``$RLGRAPH_TEST_BACKENDS=tf,jax``: exactly those, for every test.
- Otherwise the default set: "tf" and "pytorch" (``rlgraph.utils.backend.BACKENDS``), and "jax" for the
  tests marked ``all_backends``, where JAX is installed. A test module opts in with
  ``pytestmark = pytest.mark.all_backends`` (a single test with the decorator): rlgraph's component and foundation
  tests do (layers to optimizers, memories, the RL maths, the builder and executors), and so do the agent suites
  (DQN/Ape-X, IMPALA/APPO, R2D2: agents built from configs, their updates, checkpoints and learning runs; the
  longest JAX learning runs are in ``make test-all``); the engine-level ones (towers, Ray, the central and
  distributed engines) do not, as their JAX runs would cost CI minutes each: they run on JAX with ``--backend jax``
  (and have JAX tests of their own: tests/test_jax_*.py). ``$RLGRAPH_JAX_TESTS`` changes the default: ``all`` (JAX for every backend-parametrized
  test), ``none`` (for none), ``marked`` (the default). The marker's name holds no backend's name, so that
  ``-k jax`` / ``-k "not jax"`` still select by the backend in the test's id.

A backend of the set that is not installed skips the test; JAX added by the marker is left out instead.
"""
import os

import pytest

from rlgraph.utils.backend import BACKENDS, backend_available, normalize_backend
from rlgraph.utils.errors import RLGraphSpecError

#: The marker that adds JAX to a test's default backends (all graph backends, ``GRAPH_BACKENDS``).
JAX_MARKER = "all_backends"
#: ``$RLGRAPH_JAX_TESTS`` values: which tests run on JAX when no backend is chosen.
JAX_TESTS_CHOICES = ("marked", "all", "none")


def pytest_addoption(parser):
    parser.addoption("--backend", action="append", default=None,
                     help="rlgraph backend(s) to run backend-parametrized tests on (tf, pytorch, jax; default tf "
                          f"and pytorch, and jax for tests marked {JAX_MARKER}).")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{JAX_MARKER}: the test's backend parametrization includes JAX unless "
                                       "--backend / $RLGRAPH_TEST_BACKENDS chooses the backends (rlgraph plugin).")


def _chosen(config):
    chosen = config.getoption("--backend", default=None)
    if not chosen and os.environ.get("RLGRAPH_TEST_BACKENDS"):
        chosen = os.environ["RLGRAPH_TEST_BACKENDS"].split(",")
    return [normalize_backend(b) for b in chosen] if chosen else None


def _jax_tests():
    value = os.environ.get("RLGRAPH_JAX_TESTS", "marked").strip().lower() or "marked"
    if value not in JAX_TESTS_CHOICES:
        raise RLGraphSpecError(f"$RLGRAPH_JAX_TESTS is '{value}'; use one of {', '.join(JAX_TESTS_CHOICES)}.")
    return value


def selected_backends(config, definition=None):
    """The backends a test (its ``definition`` node, for its markers) runs on; see the module docstring."""
    chosen = _chosen(config)
    if chosen:
        return chosen
    backends = list(BACKENDS)
    jax_tests = _jax_tests()
    marked = definition is not None and definition.get_closest_marker(JAX_MARKER) is not None
    if "jax" not in backends and (jax_tests == "all" or (jax_tests == "marked" and marked)) \
            and backend_available("jax"):
        backends.append("jax")
    return backends


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", selected_backends(metafunc.config, metafunc.definition), indirect=True)


@pytest.fixture
def backend(request):
    """The backend name ("tf", "pytorch" or "jax"); skips the test if that backend is not installed."""
    name = request.param
    if not backend_available(name):
        pytest.skip(f"backend {name} is not installed")
    return name
