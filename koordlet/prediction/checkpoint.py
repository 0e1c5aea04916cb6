"""Where the predictor's models survive a restart: a small SQLite file beside the metric cache's.

Koordinator writes one JSON file per model under --prediction-checkpoint-filepath; here a row
per model (its uid and the same JSON) in ``prediction.db`` next to ``metrics.db``, so the
folder that already holds koordlet's history (--tsdb-path) holds its models too, and a model is
replaced in one transaction (Koordinator's write-then-rename). A file that cannot be opened,
or a row that does not parse, is logged and skipped: the predictor then starts that model
cold, never fails.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE_NAME = "prediction.db"

_SCHEMA = "CREATE TABLE IF NOT EXISTS checkpoints (uid TEXT PRIMARY KEY, model TEXT NOT NULL)"


@dataclass(frozen=True)
class Stored:
    """One row read back: the model's JSON object, or why it could not be read."""

    uid: str
    model: dict[str, Any] | None
    error: str | None = None


class CheckpointStore:
    """Saved models by uid; ``path`` None keeps them in memory (no metric cache folder)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()  # training and checkpointing run in worker threads
        self._db = self._open(path)

    @staticmethod
    def _open(path: Path | None) -> sqlite3.Connection:
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(path, check_same_thread=False)
                db.execute(_SCHEMA)
                db.commit()
                return db
            except (OSError, sqlite3.Error) as err:
                log.error(
                    "prediction checkpoints: cannot open %s (%s); keeping them in memory "
                    "(models start cold after a restart)",
                    path,
                    err,
                )
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.execute(_SCHEMA)
        return db

    def save(self, models: dict[str, dict[str, Any]]) -> bool:
        """Store each model under its uid, in one transaction (one commit for a pass's
        checkpoints); False (logged) when the file refuses them."""
        rows = [(uid, json.dumps(model, separators=(",", ":"))) for uid, model in models.items()]
        return self._write("INSERT OR REPLACE INTO checkpoints (uid, model) VALUES (?, ?)", rows)

    def remove(self, uid: str) -> bool:
        return self._write("DELETE FROM checkpoints WHERE uid = ?", [(uid,)])

    def _write(self, sql: str, rows: Sequence[tuple[str, ...]]) -> bool:
        try:
            with self._lock, self._db:
                self._db.executemany(sql, rows)
        except sqlite3.Error as err:  # a full or damaged disk: the models live on in memory
            log.error("prediction checkpoints: cannot write %s: %s", self.path, err)
            return False
        return True

    def restore(self) -> list[Stored]:
        """Every saved model; a row that is not a JSON object comes back with its error."""
        try:
            with self._lock:
                rows = self._db.execute("SELECT uid, model FROM checkpoints").fetchall()
        except sqlite3.Error as err:  # a damaged file: start cold
            log.error("prediction checkpoints: cannot read %s: %s", self.path, err)
            return []
        found = []
        for uid, text in rows:
            try:
                model = json.loads(text)
            except (TypeError, ValueError) as err:
                found.append(Stored(str(uid), None, f"not JSON: {err}"))
                continue
            if not isinstance(model, dict):
                found.append(Stored(str(uid), None, "not a JSON object"))
                continue
            found.append(Stored(str(uid), model))
        return found

    def close(self) -> None:
        with self._lock:
            self._db.close()
