"""Batch-size buckets of central inference: a backend that compiles per input shape sees few batch sizes.

The inference server's batch size varies with how many requests arrived (1 .. the largest batch of the run). On a
backend whose executor compiles an API method once per input shape (``GraphExecutor.compiles_per_shape``: JAX,
where ``jax.jit`` traces per shape), the server pads each batch along its batch axis to a bucket size and slices
the outputs back, so that ``act`` compiles once per bucket instead of once per batch size:

    bucket_size(n, largest) = min(2 ** ceil(log2(n)), largest)

the next power of two, capped at the largest batch the run can make (itself a bucket; ``largest_batch``). The
padding rows are copies of the batch's last real row (never zeros: a preprocessor or network sees only values of
the state space), and their outputs are discarded.
"""
import numpy as np
import optree

from rlgraph.utils.errors import RLGraphError


def bucket_size(n, largest):
    """The bucket of a batch of ``n`` rows: the next power of two at or above ``n``, capped at ``largest``.

    Args:
        n: The batch's rows (``1 <= n <= largest``).
        largest: The largest batch the run can make (a bucket itself).
    """
    n, largest = int(n), int(largest)
    if not 1 <= n <= largest:
        raise RLGraphError(f"Central inference: a batch of {n} rows is outside 1..{largest} (the largest batch "
                           f"of this run's inference calls).")
    return min(1 << (n - 1).bit_length(), largest)


def buckets(largest):
    """All bucket sizes up to ``largest``: the powers of two below it, and ``largest``."""
    largest = int(largest)
    return [1 << k for k in range(max(largest - 1, 0).bit_length())] + [largest]


def largest_batch(env_counts, batch_rows):
    """The most rows one inference call serves: the largest sum of actors' environment counts up to
    ``batch_rows`` (a call serves whole actors), or one actor's count where that alone is more.

    Args:
        env_counts: Environments of each actor.
        batch_rows: The most rows one inference call is to serve (``InferenceServer.batch_rows``).
    """
    counts = [int(c) for c in env_counts]
    if not counts or min(counts) < 1:
        raise RLGraphError(f"Central inference: environment counts per actor must be positive, got {counts}.")
    limit = min(int(batch_rows), sum(counts))
    mask = (1 << (limit + 1)) - 1
    sums = 1  # Bit k set: some set of actors has k environments in all (subset sums up to ``limit``).
    for c in counts:
        sums |= (sums << c) & mask
    return max(sums.bit_length() - 1, max(counts))


def num_rows(tree):
    """The rows of a nested batch (every leaf's leading dimension; an ``RLGraphError`` where they differ)."""
    sizes = {int(np.shape(leaf)[0]) for leaf in optree.tree_leaves(tree)}
    if len(sizes) != 1:
        raise RLGraphError(f"Central inference: the leaves of a batch have different numbers of rows {sorted(sizes)} "
                           f"(or the batch has no leaves).")
    return sizes.pop()


def pad_batch(tree, size):
    """``tree`` (nested arrays, batch on axis 0) padded to ``size`` rows with copies of its last row."""
    n = num_rows(tree)
    if size < n:
        raise RLGraphError(f"Central inference: cannot pad a batch of {n} rows to {size}.")
    if size == n:
        return tree
    index = np.minimum(np.arange(size), n - 1)
    return optree.tree_map(lambda x: np.asarray(x)[index], tree)


def unpad(tree, n):
    """The first ``n`` rows of every leaf of ``tree`` (the real rows of a padded call's outputs)."""
    return optree.tree_map(lambda x: x[:n], tree)
