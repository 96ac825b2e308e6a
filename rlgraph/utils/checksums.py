"""Checksums of the files in a directory: written with every stored model and checkpoint, verified on load."""
import hashlib
import json
import os

from rlgraph.utils.errors import RLGraphCheckpointError

#: The manifest file a directory's checksums are kept in.
MANIFEST_FILE = "checksums.json"


def _files_of(directory):
    out = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            if rel != MANIFEST_FILE:
                out.append(rel)
    return sorted(out)


def file_sha256(path, chunk=1 << 20):
    """The SHA-256 hex digest of one file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync_path(path):
    """Flushes a file (or a directory's entries) to disk."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(directory):
    """Writes ``checksums.json`` (size and SHA-256 of every other file below ``directory``), all flushed to disk.

    Returns:
        The manifest dict ``{relative path: {"size": int, "sha256": str}}``.
    """
    manifest = {}
    for rel in _files_of(directory):
        path = os.path.join(directory, rel)
        fsync_path(path)
        manifest[rel] = dict(size=os.path.getsize(path), sha256=file_sha256(path))
    path = os.path.join(directory, MANIFEST_FILE)
    with open(path, "w") as f:
        json.dump(dict(format="rlgraph-checksums", version=1, files=manifest), f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    for root, _, _ in os.walk(directory):
        fsync_path(root)
    return manifest


def verify_manifest(directory):
    """Checks every file below ``directory`` against its ``checksums.json``.

    Raises:
        RLGraphCheckpointError: naming the first file that is missing, truncated, changed or unlisted, or a
            missing or unreadable manifest.
    """
    path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(path):
        raise RLGraphCheckpointError(f"'{directory}' has no {MANIFEST_FILE}: it was not completely written (or "
                                     f"not by rlgraph), so it cannot be trusted.")
    try:
        with open(path) as f:
            files = json.load(f)["files"]
        files = {str(k): (int(v["size"]), str(v["sha256"])) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise RLGraphCheckpointError(f"'{path}' is damaged (not a checksum manifest).") from None
    for rel, (size, sha) in sorted(files.items()):
        file = os.path.join(directory, rel)
        if not os.path.isfile(file):
            raise RLGraphCheckpointError(f"'{file}' is missing from the checkpoint.")
        actual = os.path.getsize(file)
        if actual != size:
            raise RLGraphCheckpointError(f"'{file}' is damaged: {actual} bytes where {size} were written "
                                         f"(truncated or overwritten).")
        if file_sha256(file) != sha:
            raise RLGraphCheckpointError(f"'{file}' is damaged: its checksum does not match the one written "
                                         f"with it.")
    extra = sorted(set(_files_of(directory)) - set(files))
    if extra:
        raise RLGraphCheckpointError(f"'{os.path.join(directory, extra[0])}' was not part of the checkpoint as "
                                     f"written (files added afterwards: {extra[:5]}).")
