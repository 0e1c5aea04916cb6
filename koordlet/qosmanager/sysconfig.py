"""SystemConfig: node-wide kernel settings from the NodeSLO's ``systemStrategy``.

Each setting is written only when its field is set, and only when the file holds another
value:

* ``/proc/sys/vm/min_free_kbytes`` = total memory in kB x minFreeKbytesFactor / 10000, kept
  only inside [10240, 10485760] (a value outside is named in the status, not clamped);
* ``/proc/sys/vm/watermark_scale_factor`` (10..400);
* ``/sys/kernel/mm/memcg_reaper/reap_background``, ``/proc/sys/kernel/sched_group_identity_
  enabled`` and ``/sys/kernel/mm/pagecache_limit/enabled`` (0 or 1; Anolis kernels);
* ``/proc/sys/kernel/sched_idle_saver_wmark`` (Anolis);
* ``/sys/kernel/debug/sched_features``: each named feature on ("NAME") or off ("NO_NAME").

The proc and sys roots are constructor arguments, so tests run on folders. The files are read
and written by ``koordlet.executor.sysctl``. A file this kernel does not have is skipped and
named in the status; nothing here raises out of ``run``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordapi.features import FeatureGates
from koordlet.executor import sysctl
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context

NAME = "SystemConfig"
PROC_ROOT = Path("/proc")
SYS_ROOT = Path("/sys")
MIN_FREE_KBYTES = (10 * 1024, 10 * 1024 * 1024)  # the range Koordinator accepts, in kB
SCHED_FEATURES = "kernel/debug/sched_features"  # under the sys root
_FEATURE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")  # a feature name is written verbatim


@dataclass(frozen=True)
class Setting:
    """A systemStrategy field copied as is into one file."""

    field: str  # Koordinator's JSON name
    under_sys: bool  # below the sys root (else the proc root)
    path: str
    lo: int | None = None
    hi: int | None = None


SETTINGS = (
    Setting("watermarkScaleFactor", False, "sys/vm/watermark_scale_factor", 10, 400),
    Setting("memcgReapBackGround", True, "kernel/mm/memcg_reaper/reap_background", 0, 1),
    Setting("schedGroupIdentityEnabled", False, "sys/kernel/sched_group_identity_enabled", 0, 1),
    Setting("schedIdleSaverWmark", False, "sys/kernel/sched_idle_saver_wmark"),
    Setting("pageCacheLimitEnabled", True, "kernel/mm/pagecache_limit/enabled", 0, 1),
)


class SystemConfig:
    """See the module docstring."""

    name = NAME

    def __init__(
        self, proc_root: Path = PROC_ROOT, sys_root: Path = SYS_ROOT, *, interval: float = 1.0
    ) -> None:
        self.proc_root = proc_root
        self.sys_root = sys_root
        self.interval = interval

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(NAME)

    def run(self, ctx: Context) -> None:
        system = ctx.rules.slo.system
        notes: list[str] = []
        wanted: list[tuple[Path, int, str]] = []  # file, value, reason
        factor = system.get("minFreeKbytesFactor")
        if factor is not None:
            total_kb = ctx.node.memory // 1024
            value = total_kb * int(factor) // 10000
            lo, hi = MIN_FREE_KBYTES
            if lo <= value <= hi:
                reason = (
                    f"minFreeKbytesFactor {factor} x total memory {total_kb} kB / 10000 = {value}"
                )
                wanted.append((self.proc_root / "sys/vm/min_free_kbytes", value, reason))
            else:
                notes.append(f"min_free_kbytes {value} is outside [{lo}, {hi}]: not written")
        for setting in SETTINGS:
            raw = system.get(setting.field)
            if raw is None:
                continue
            value = int(raw)
            if (setting.lo is not None and value < setting.lo) or (
                setting.hi is not None and value > setting.hi
            ):
                notes.append(f"{setting.field} {value} is outside [{setting.lo}, {setting.hi}]")
                continue
            root = self.sys_root if setting.under_sys else self.proc_root
            wanted.append((root / setting.path, value, f"systemStrategy.{setting.field} {value}"))
        for path, value, reason in wanted:
            self._write(ctx, path, value, reason, notes)
        features = system.get("schedFeatures")
        if features:
            self._sched_features(ctx, features, notes)
        if not wanted and not features and not notes:
            ctx.status(NAME, "nothing configured in systemStrategy")
        else:
            ctx.status(NAME, "; ".join(notes) or "settings in place")

    @staticmethod
    def _write(ctx: Context, path: Path, value: int, reason: str, notes: list[str]) -> None:
        try:
            written = sysctl.write_int(path, value)
        except sysctl.SettingError as err:
            notes.append(str(err))
            return
        if written:
            ctx.record(Action(ctx.now, NAME, path.name, str(path), str(value), reason))

    def _sched_features(self, ctx: Context, features: Any, notes: list[str]) -> None:
        path = self.sys_root / SCHED_FEATURES
        if not isinstance(features, Mapping):
            notes.append(f"schedFeatures must map names to true or false, got {features!r}")
            return
        try:
            tokens = sysctl.read_setting(path).split()
        except sysctl.SettingError:
            notes.append(f"not on this kernel: {path}")
            return
        # The file lists each feature once, as NAME (on) or NO_NAME (off).
        current = {t.removeprefix("NO_"): not t.startswith("NO_") for t in tokens}
        for feature, on in sorted(features.items()):
            if not isinstance(on, bool) or not isinstance(feature, str):
                notes.append(f"schedFeatures.{feature}: {on!r} is not true or false")
            elif not _FEATURE.match(feature) or feature not in current:
                notes.append(f"sched feature {feature!r} not on this kernel")
            elif current[feature] != on:
                token = feature if on else f"NO_{feature}"
                try:
                    sysctl.write_token(path, token)
                except sysctl.SettingError as err:
                    notes.append(str(err))
                    continue
                reason = f"systemStrategy.schedFeatures.{feature} {str(on).lower()}"
                ctx.record(Action(ctx.now, NAME, "sched_features", str(path), token, reason))
