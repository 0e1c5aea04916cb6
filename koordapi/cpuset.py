"""CPU lists as the kernel writes them ("0-3,8,10-11"), parsed with bounds.

Values come from annotations (user input on a root daemon), so parsing caps the CPU ids: a
list naming CPU 10**9 is an error, not a billion-element set.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from koordapi.errors import QuantityError

MAX_CPU_ID = 16383  # far above any machine; keeps a hostile "0-999999999" cheap to refuse


@functools.lru_cache(maxsize=1024)
def parse_cpuset(text: str) -> frozenset[int]:
    """ "0-3,8" → {0, 1, 2, 3, 8}; "" → empty. Raises QuantityError on anything else."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for raw_part in text.split(","):
        part = raw_part.strip()
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise QuantityError(f"malformed cpu list {text!r}: {part!r}") from None
        if lo < 0 or hi < lo or hi > MAX_CPU_ID:
            raise QuantityError(f"cpu range {part!r} in {text!r} is out of range 0..{MAX_CPU_ID}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 8} → "0-3,8" (sorted, ranges collapsed)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
