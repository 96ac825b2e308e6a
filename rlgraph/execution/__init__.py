"""The engines' earlier package name: ``rlgraph.execution`` and its modules are ``rlgraph.engines``'s.

Kept so that scripts and pickles made before the rename still import: ``import rlgraph.execution.runner`` gives
the module object of ``rlgraph.engines.runner`` itself (one module under two names, so classes compare equal),
loaded lazily like the real package's engine modules, with a ``DeprecationWarning``.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_OLD, _NEW = "rlgraph.execution", "rlgraph.engines"


class _RenamedPackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``rlgraph.execution.X`` to the already (or newly) imported ``rlgraph.engines.X``."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_OLD + "."):
            return None
        real = importlib.util.find_spec(_NEW + fullname[len(_OLD):])
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=real.submodule_search_locations is not None)

    def create_module(self, spec):
        return importlib.import_module(_NEW + spec.name[len(_OLD):])

    def exec_module(self, module):
        pass  # Executed under its real name by create_module.


if not any(isinstance(finder, _RenamedPackage) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RenamedPackage())  # Before the path finder, which would load a second copy.

warnings.warn("rlgraph.execution is now rlgraph.engines; import it under its new name.", DeprecationWarning,
              stacklevel=2)

from rlgraph.engines import *  # noqa: E402,F401,F403
from rlgraph.engines import __all__  # noqa: E402,F401
