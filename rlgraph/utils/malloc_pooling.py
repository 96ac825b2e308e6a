"""Pooling in the C allocator (glibc's malloc): freed buffers of up to 32 MiB are kept for reuse.

By default glibc serves large allocations (above a threshold that it adapts, from 128 KiB) with their own
``mmap`` and hands them back on ``free``, and it returns freed memory at the top of a heap to the system. A
learner whose update makes megabyte-sized intermediates (PyTorch's CPU tensors come from this allocator) then
faults their pages in anew on every update. ``mallopt`` with a fixed mmap threshold of 32 MiB (glibc's
largest) and a trim threshold of 1 GiB keeps such buffers in the heap for the next update; allocations above
32 MiB are still mapped and unmapped each time. The same settings go into the environment
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``), which glibc reads at the start of the processes this
one starts afterwards.
"""
import ctypes
import ctypes.util
import logging
import os

logger = logging.getLogger(__name__)

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Allocations up to this size stay in the heap (glibc accepts at most 32 MiB on 64-bit systems).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Freed memory at the top of a heap is kept up to this size.
TRIM_THRESHOLD = 1024 * 1024 * 1024
#: The environment variables glibc reads when a process starts.
VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}


def glibc_library():
    """The C library if it is glibc (it has ``gnu_get_libc_version`` and ``mallopt``), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def enable_malloc_pooling():
    """Sets glibc's thresholds in this process and the environment of the processes it starts after.

    Returns:
        True where applied; False where the C library is not glibc (macOS, musl), logged as a warning.
    """
    libc = glibc_library()
    if libc is None:
        logger.warning("malloc_pooling not applied: the C library is not glibc (its mallopt thresholds are "
                       "glibc's).")
        return False
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    applied = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    if not applied:
        logger.warning("malloc_pooling not applied: glibc's mallopt refused the thresholds.")
        return False
    os.environ.update(VARIABLES)
    return True
