"""Backend selection and lazy access to the deep-learning libraries.

Nothing here imports TensorFlow, PyTorch or JAX at import time: ``tf``, ``torch`` and ``jax`` are module proxies
that import the real library on first attribute access, so a user with only one backend installed can still use
rlgraph. After the first access, attribute look-ups on the proxy cost the same as on the real module.

"jax" builds and runs component graphs through ``rlgraph.executors.jax_executor.JaxExecutor``: graphs
whose graph functions all have a JAX body; the build of any other graph (a user's graph function written for TF or
PyTorch only) raises one line naming the component and what to write
(``rlgraph.executors.jax_executor.JAX_NOT_YET``). It is never the default backend.
"""
import contextlib
import importlib
import os
import sys
import tempfile
import types

from rlgraph.utils.errors import RLGraphBackendError

#: Canonical backend names and the spellings accepted for them.
BACKEND_ALIASES = {
    "tf": "tf", "tensorflow": "tf", "tf2": "tf",
    "pytorch": "pytorch", "torch": "pytorch", "pt": "pytorch",
    "jax": "jax",
}
#: The default backends (the first installed is the default; the test plugin's default parametrization).
BACKENDS = ("tf", "pytorch")
#: Every backend that builds and runs component graphs (JAX is never the default).
GRAPH_BACKENDS = ("tf", "pytorch", "jax")
_BACKEND_MODULES = {"tf": "tensorflow", "pytorch": "torch", "jax": "jax"}


def normalize_backend(name, graphs=True):
    """Returns the canonical name ("tf", "pytorch" or "jax") of a backend spelling, or raises.

    Args:
        name: A backend spelling ("tf", "tensorflow", "torch", "jax", ...).
        graphs: The backend is chosen to build component graphs (an agent's, an executor's, a graph
            function's). Every backend builds graphs now; a JAX build refuses graphs with graph functions that
            have no JAX body (``JaxExecutor``). Kept for callers that pass it.
    """
    key = str(name).strip().lower()
    if key not in BACKEND_ALIASES:
        raise RLGraphBackendError(f"Unknown backend '{name}'; use one of {', '.join(GRAPH_BACKENDS)}.")
    return BACKEND_ALIASES[key]


def get_default_backend():
    """The default backend: ``$RLGRAPH_BACKEND`` if set, else the first installed of tf, pytorch."""
    env = os.environ.get("RLGRAPH_BACKEND")
    if env:
        return normalize_backend(env)
    for name in BACKENDS:
        if backend_available(name):
            return name
    raise RLGraphBackendError("Neither TensorFlow nor PyTorch is installed: pip install 'rlgraph[tf]' or 'rlgraph[pytorch]'.")


def backend_available(name):
    """Whether the library of backend ``name`` can be imported (without importing it)."""
    import importlib.util
    return importlib.util.find_spec(_BACKEND_MODULES[normalize_backend(name, graphs=False)]) is not None


#: Lines the backends' C++ runtimes print on import that say nothing about the user's run (hidden unless -v).
IMPORT_NOTICES = ("All log messages before absl::InitializeLog()", "oneDNN custom operations are on",
                  "cpu_feature_guard.cc", "To enable the following instructions", "rebuild TensorFlow with the "
                  "appropriate compiler flags", "Unable to register cu", "Could not find cuda drivers")


@contextlib.contextmanager
def import_notices_filtered():
    """Holds back what C++ code writes to stderr (file descriptor 2) during the block and writes it back without
    the ``IMPORT_NOTICES`` lines, where ``$RLGRAPH_QUIET_IMPORTS`` is "1" (``rlgraph.utils.quiet``); else does
    nothing. Python-level writes to ``sys.stderr`` go through the same descriptor and are kept."""
    if os.environ.get("RLGRAPH_QUIET_IMPORTS") != "1":
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().decode(errors="replace").splitlines(keepends=True)
                    if not any(notice in line for notice in IMPORT_NOTICES)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


class LazyModule(types.ModuleType):
    """A module proxy that imports ``module_name`` on first use and then mirrors its namespace."""

    def __init__(self, module_name, install_hint=""):
        super().__init__(module_name)
        self._lazy_module_name = module_name
        self._lazy_install_hint = install_hint

    def _load(self):
        try:
            with import_notices_filtered():
                module = importlib.import_module(self._lazy_module_name)
        except ImportError as e:
            raise RLGraphBackendError(
                f"'{self._lazy_module_name}' is not installed ({e}). {self._lazy_install_hint}"
            ) from None
        self.__dict__.update(module.__dict__)
        self.__dict__["_lazy_real_module"] = module
        return module

    def __getattr__(self, item):
        module = self.__dict__.get("_lazy_real_module") or self._load()
        return getattr(module, item)

    def __dir__(self):
        return dir(self.__dict__.get("_lazy_real_module") or self._load())


tf = LazyModule("tensorflow", "Install it with: pip install 'rlgraph[tf]'.")
torch = LazyModule("torch", "Install it with: pip install 'rlgraph[pytorch]'.")
jax = LazyModule("jax", "Install it with: pip install 'rlgraph[jax]'.")
