"""The network message layout of central inference: raw arrays with dtype and shape, nothing pickled.

A message is ``MAGIC`` (4 bytes), a version byte, a kind byte, the actor index (uint32), the number of arrays
(uint16), then per array: a dtype code (uint8, from a fixed list of plain numeric dtypes), the number of
dimensions (uint8), the dimensions (uint32 each) and the array's bytes (little-endian, C order; their count
follows from dtype and shape). Everything is little-endian. ``decode`` checks every field against the bytes
it got and raises ``WireError`` for anything else: data from the network is never unpickled or evaluated.
"""
import struct

import numpy as np

MAGIC = b"RLGI"
VERSION = 1
# Kinds: actor -> server ...
HELLO, FIRST, STEP = b"H", b"F", b"S"
# ... and server -> actor.
ACTIONS = b"A"
KINDS = (HELLO, FIRST, STEP, ACTIONS)

#: The dtypes a message may hold (code -> dtype); anything else is rejected.
DTYPES = {1: np.dtype("bool"), 2: np.dtype("<u1"), 3: np.dtype("<i1"), 4: np.dtype("<i2"), 5: np.dtype("<i4"),
          6: np.dtype("<i8"), 7: np.dtype("<u2"), 8: np.dtype("<u4"), 9: np.dtype("<u8"), 10: np.dtype("<f2"),
          11: np.dtype("<f4"), 12: np.dtype("<f8")}
_CODES = {dtype: code for code, dtype in DTYPES.items()}
_HEADER = struct.Struct("<4sBcIH")
_ARRAY = struct.Struct("<BB")
MAX_ARRAYS = 256
MAX_NDIM = 8


class WireError(ValueError):
    """A message that does not follow the layout (it is rejected, never interpreted)."""


def encode(kind, index, arrays):
    """The bytes of a message of ``kind`` from actor ``index`` holding ``arrays`` (numpy arrays)."""
    parts = [_HEADER.pack(MAGIC, VERSION, kind, int(index), len(arrays))]
    for array in arrays:
        array = np.asarray(array)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        code = _CODES.get(np.dtype(dtype.str))
        if code is None:
            raise WireError(f"dtype {array.dtype} cannot be sent (allowed: {sorted(str(d) for d in DTYPES.values())}).")
        array = np.ascontiguousarray(array, dtype=DTYPES[code])
        parts.append(_ARRAY.pack(code, array.ndim) + struct.pack(f"<{array.ndim}I", *array.shape))
        parts.append(array.tobytes())
    return b"".join(parts)


def decode(data, max_bytes=None):
    """``(kind, index, arrays)`` of a message; raises ``WireError`` for any deviation from the layout.

    Args:
        data: The message bytes.
        max_bytes: The largest message accepted (None: any).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a message must be bytes, got {type(data).__name__}.")
    data = memoryview(data).cast("B")
    if max_bytes is not None and len(data) > max_bytes:
        raise WireError(f"a message of {len(data)} bytes is larger than the {max_bytes} accepted.")
    if len(data) < _HEADER.size:
        raise WireError(f"a message of {len(data)} bytes is shorter than its header.")
    magic, version, kind, index, count = _HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        raise WireError(f"not an rlgraph central-inference message (magic {bytes(magic)!r}, version {version}).")
    if kind not in KINDS:
        raise WireError(f"unknown message kind {kind!r}.")
    if count > MAX_ARRAYS:
        raise WireError(f"a message may hold at most {MAX_ARRAYS} arrays, this one claims {count}.")
    offset, arrays = _HEADER.size, []
    for _ in range(count):
        if offset + _ARRAY.size > len(data):
            raise WireError("a message ends inside an array header.")
        code, ndim = _ARRAY.unpack_from(data, offset)
        offset += _ARRAY.size
        dtype = DTYPES.get(code)
        if dtype is None or ndim > MAX_NDIM:
            raise WireError(f"an array has an unknown dtype code {code} or too many dimensions ({ndim}).")
        if offset + 4 * ndim > len(data):
            raise WireError("a message ends inside an array's shape.")
        shape = struct.unpack_from(f"<{ndim}I", data, offset)
        offset += 4 * ndim
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset + nbytes > len(data):
            raise WireError(f"an array of shape {shape} and dtype {dtype} needs {nbytes} bytes; the message has "
                            f"{len(data) - offset} left.")
        arrays.append(np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
                      .reshape(shape).copy())
        offset += nbytes
    if offset != len(data):
        raise WireError(f"a message has {len(data) - offset} bytes after its last array.")
    return kind, index, arrays
