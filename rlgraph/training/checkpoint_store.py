"""A run's checkpoints: written completely before they count, switched to atomically, verified on load."""
import json
import logging
import os
import re
import shutil
import uuid

from rlgraph.utils.checksums import fsync_path, verify_manifest, write_manifest
from rlgraph.utils.errors import RLGraphCheckpointError

logger = logging.getLogger(__name__)

STATE_FILE = "trainer_state.json"
_NAME = re.compile(r"^ckpt-(\d{8})$")


class CheckpointStore:
    """The checkpoints of one logdir: ``checkpoints/ckpt-NNNNNNNN/`` plus a link ``checkpoint`` to the newest.

    A checkpoint is written into a temporary directory, its files flushed and listed with their checksums
    (``checksums.json``), then renamed into ``checkpoints/``; only then is the link ``checkpoint`` switched to
    it, by one atomic rename. A crash at any point leaves the previous checkpoint in place and loadable. The
    newest ``keep`` checkpoints are kept. ``load`` verifies the checksums and falls back to an older
    checkpoint (with a warning naming the damaged file) when the newest is damaged.

    Args:
        logdir: The run's directory.
        keep: How many checkpoints to keep (>= 1).
    """

    def __init__(self, logdir, keep=3):
        self.logdir = logdir
        self.keep = max(1, int(keep))
        self.link = os.path.join(logdir, "checkpoint")
        self.root = os.path.join(logdir, "checkpoints")

    # --- what is there ------------------------------------------------------------------------------------
    def _numbered(self):
        """``[(number, path)]`` of the complete checkpoints in ``checkpoints/``, newest first."""
        if not os.path.isdir(self.root):
            return []
        out = []
        for name in os.listdir(self.root):
            match = _NAME.match(name)
            if match and os.path.isdir(os.path.join(self.root, name)):
                out.append((int(match.group(1)), os.path.join(self.root, name)))
        return sorted(out, reverse=True)

    def candidates(self):
        """Checkpoint directories, the one ``checkpoint`` points to first, then the others newest first."""
        out = []
        if os.path.isdir(self.link):
            out.append(os.path.realpath(self.link))
        for _, path in self._numbered():
            if os.path.realpath(path) not in out:
                out.append(os.path.realpath(path))
        return out

    def exists(self):
        """Whether the logdir holds any checkpoint (complete or not)."""
        return os.path.lexists(self.link) or bool(self._numbered())

    # --- write --------------------------------------------------------------------------------------------
    def save(self, write_model, state):
        """Writes a new checkpoint and makes it the current one.

        Args:
            write_model: Callable writing the model into the directory it is given.
            state: A JSON-serializable dict stored as ``trainer_state.json``.

        Returns:
            The new checkpoint's directory.
        """
        os.makedirs(self.root, exist_ok=True)
        self._adopt_legacy_directory()
        numbered = self._numbered()
        number = numbered[0][0] + 1 if numbered else 1
        tmp = os.path.join(self.root, f".tmp-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(tmp)
            write_model(os.path.join(tmp, "model"))
            with open(os.path.join(tmp, STATE_FILE), "w") as f:
                json.dump(state, f)
            write_manifest(tmp)
            final = os.path.join(self.root, f"ckpt-{number:08d}")
            os.rename(tmp, final)
            fsync_path(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._point_to(final)
        self._prune()
        return final

    def _point_to(self, path):
        """Switches the link ``checkpoint`` to ``path`` in one atomic step (a rename over the old link)."""
        tmp_link = os.path.join(self.logdir, f".checkpoint-{uuid.uuid4().hex[:8]}")
        os.symlink(os.path.relpath(path, self.logdir), tmp_link)
        os.replace(tmp_link, self.link)
        fsync_path(self.logdir)

    def _adopt_legacy_directory(self):
        """A ``checkpoint`` that is a plain directory (written before checkpoints were numbered) becomes the
        oldest numbered one, so that the link can take its name; the rename is atomic, and the loader finds it
        in ``checkpoints/`` in the meantime."""
        if os.path.isdir(self.link) and not os.path.islink(self.link):
            target = os.path.join(self.root, f"ckpt-{0:08d}")
            if os.path.exists(target):
                target = os.path.join(self.root, f".legacy-{uuid.uuid4().hex[:8]}")
            os.rename(self.link, target)

    def _prune(self):
        current = os.path.realpath(self.link)
        for _, path in self._numbered()[self.keep:]:
            if os.path.realpath(path) != current:
                shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.root):
            if name.startswith(".tmp-"):
                shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)

    # --- read ---------------------------------------------------------------------------------------------
    def latest(self):
        """``(directory, state dict)`` of the newest checkpoint that passes its checksums, or None if there is
        no checkpoint at all.

        Raises:
            RLGraphCheckpointError: There are checkpoints, but every one is damaged (each named).
        """
        problems = []
        for path in self.candidates():
            try:
                verify_manifest(path)
                with open(os.path.join(path, STATE_FILE)) as f:
                    state = json.load(f)
                if not isinstance(state, dict):
                    raise RLGraphCheckpointError(f"'{os.path.join(path, STATE_FILE)}' is not a trainer state.")
            except RLGraphCheckpointError as e:
                problems.append(str(e))
                logger.warning("Skipping a damaged checkpoint: %s", e)
                continue
            except (OSError, ValueError) as e:
                problems.append(f"'{path}': {e}")
                logger.warning("Skipping a damaged checkpoint '%s': %s", path, e)
                continue
            if problems:
                # (Resume and evaluate both read it: the message says which checkpoint, not what for.)
                logger.warning("Using the older checkpoint '%s' (the newer ones are damaged).", path)
            return path, state
        if problems:
            raise RLGraphCheckpointError(f"every checkpoint in '{self.logdir}' is damaged: " + "; ".join(problems))
        return None
