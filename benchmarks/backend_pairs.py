"""Counts the graph functions written once per backend (the "maths once" measure).

    python benchmarks/backend_pairs.py [--list]

Prints how many graph functions (defined in a class body of rlgraph's components) have a TensorFlow and a
PyTorch implementation, and with ``--list`` which ones. A graph function written once over the backend
operations table (``self.ops``) is not counted.
"""
import argparse
import importlib
import pkgutil

import rlgraph
from rlgraph.backends.ops import BackendOps  # noqa: F401  (the table the one-body functions use)
from rlgraph.utils.decorators import GraphFunction


def per_backend_pairs():
    """``[(module, class, graph function)]`` of the graph functions with a body per backend."""
    for info in pkgutil.walk_packages(rlgraph.__path__, "rlgraph."):
        if ".tests" in info.name:
            continue
        importlib.import_module(info.name)
    from rlgraph.components.component import Component
    pairs, todo, seen = [], [Component], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        for name, attr in vars(cls).items():
            if not isinstance(attr, GraphFunction) or not {"tf", "pytorch"} <= set(attr.impls):
                continue
            # Only implementations written in this class body (not merged in from parents).
            own = [fn for b, fn in attr.impls.items() if b in ("tf", "pytorch") and fn.__qualname__.startswith(cls.__qualname__ + ".")]
            if len(own) == 2 and cls.__module__.startswith("rlgraph."):
                pairs.append((cls.__module__, cls.__qualname__, name))
    return sorted(pairs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the graph functions")
    args = parser.parse_args()
    pairs = per_backend_pairs()
    if args.list:
        for module, cls, name in pairs:
            print(f"{module}.{cls}.{name}")
    print(f"{len(pairs)} graph functions written once per backend")


if __name__ == "__main__":
    main()
