"""File changes that are undone together: an installer either finishes or leaves no trace."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Transaction:
    """Records every file and folder it creates or changes; ``rollback`` puts them back."""

    created: list[Path] = field(default_factory=list)  # files and folders, in creation order
    saved: dict[Path, bytes] = field(default_factory=dict)  # changed files' previous content
    modes: dict[Path, int] = field(default_factory=dict)

    def _mkdirs(self, folder: Path) -> None:
        missing = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for path in reversed(missing):
            path.mkdir()
            self.created.append(path)

    def _remember(self, path: Path) -> None:
        if path in self.saved or path in self.created:
            return
        if path.exists():
            self.saved[path] = path.read_bytes()
            self.modes[path] = path.stat().st_mode & 0o7777
        else:
            self.created.append(path)

    def write(self, path: Path, content: str, mode: int = 0o644) -> None:
        """Write the whole file atomically (a reader never sees half of it)."""
        self._mkdirs(path.parent)
        self._remember(path)
        tmp = path.with_name(f".{path.name}.koordctl-tmp")
        tmp.write_text(content)
        tmp.chmod(mode)
        tmp.replace(path)

    def append(self, path: Path, content: str) -> None:
        """Add to the end of an existing file, keeping a copy for rollback."""
        self._remember(path)
        with path.open("a") as f:
            f.write(content)

    def rollback(self) -> None:
        for path, content in self.saved.items():
            path.write_bytes(content)
            path.chmod(self.modes[path])
        for path in reversed(self.created):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        self.created.clear()
        self.saved.clear()
