"""A run's state (memories, partial trajectories, counters, RNG states) as files: numpy arrays plus JSON.

A run state is a nested structure of dicts (str keys), lists, tuples, numpy arrays and JSON scalars (bool,
int, float, str, None). ``save_run_state`` writes its arrays into ``run_state.npz`` (numpy's own format,
read back with ``allow_pickle=False``) and everything else into ``run_state.json``, where each array is a
reference into the npz file. Nothing is pickled. Backend-free: the backends' RNG states arrive here as numpy
arrays already.
"""
import json
import os

import numpy as np

from rlgraph.utils.errors import RLGraphCheckpointError
from rlgraph.utils.text import with_article

#: The files of a stored run state.
ARRAYS_FILE = "run_state.npz"
TREE_FILE = "run_state.json"
FORMAT = "rlgraph-run-state"

_ARRAY, _TUPLE, _ITEMS = "__array__", "__tuple__", "__items__"


def encode_tree(tree, arrays, path="state"):
    """``tree`` as a JSON-able structure; its arrays are moved into ``arrays`` (name -> array).

    Dicts whose keys are all str stay dicts; tuples, numpy scalars and arrays are marked so that
    ``decode_tree`` restores them.
    """
    if isinstance(tree, np.ndarray):
        if tree.dtype.kind in "OV":
            raise RLGraphCheckpointError(f"run state '{path}': arrays of dtype {tree.dtype} cannot be stored.")
        name = f"a{len(arrays)}"
        arrays[name] = tree
        return {_ARRAY: name}
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, dict):
        if not all(isinstance(k, str) for k in tree):
            raise RLGraphCheckpointError(f"run state '{path}': dict keys must be str, got {list(tree)[:5]}.")
        if any(k in (_ARRAY, _TUPLE, _ITEMS) for k in tree):
            return {_ITEMS: [[k, encode_tree(v, arrays, f"{path}/{k}")] for k, v in tree.items()]}
        return {k: encode_tree(v, arrays, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, tuple):
        return {_TUPLE: [encode_tree(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]}
    if isinstance(tree, list):
        return [encode_tree(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise RLGraphCheckpointError(f"run state '{path}': {with_article(type(tree).__name__)} cannot be stored (only "
                                 f"dicts, lists, tuples, numpy arrays and JSON scalars).")


def decode_tree(tree, arrays):
    """Inverse of ``encode_tree``: ``arrays`` maps the array names to the arrays read back."""
    if isinstance(tree, dict):
        if _ARRAY in tree:
            name = tree[_ARRAY]
            if name not in arrays:
                raise RLGraphCheckpointError(f"the run state refers to an array '{name}' that {ARRAYS_FILE} lacks.")
            return arrays[name]
        if _TUPLE in tree:
            return tuple(decode_tree(v, arrays) for v in tree[_TUPLE])
        if _ITEMS in tree:
            return {k: decode_tree(v, arrays) for k, v in tree[_ITEMS]}
        return {k: decode_tree(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [decode_tree(v, arrays) for v in tree]
    return tree


def save_run_state(directory, state):
    """Writes ``state`` into ``directory`` as ``run_state.npz`` and ``run_state.json``.

    Raises:
        RLGraphCheckpointError: ``state`` holds something other than dicts, lists, tuples, arrays and scalars.
    """
    os.makedirs(directory, exist_ok=True)
    arrays = {}
    tree = encode_tree(state, arrays)
    with open(os.path.join(directory, ARRAYS_FILE), "wb") as f:
        np.savez(f, **arrays)
    with open(os.path.join(directory, TREE_FILE), "w") as f:
        json.dump({"format": FORMAT, "version": 1, "state": tree}, f)


def has_run_state(directory):
    """Whether ``directory`` holds a stored run state."""
    return os.path.isfile(os.path.join(directory, TREE_FILE))


def load_run_state(directory):
    """Reads what ``save_run_state`` wrote (arrays loaded without pickle); None if there is none.

    Raises:
        RLGraphCheckpointError: A file is missing, unreadable or not a run state.
    """
    tree_path, arrays_path = os.path.join(directory, TREE_FILE), os.path.join(directory, ARRAYS_FILE)
    if not os.path.isfile(tree_path):
        return None
    try:
        with open(tree_path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not an rlgraph run state")
        with np.load(arrays_path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RLGraphCheckpointError(f"the run state in '{directory}' cannot be read: {type(e).__name__}: {e}") \
            from None
    return decode_tree(doc["state"], arrays)
