"""The ten-line plugin in docs/nri-plugin-api.md works as shown."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from nri_plugin import Stub, api
from nri_plugin.testing import FakeRuntime
from tests.e2e.harness.paths import REPO_ROOT


def docs_example() -> str:
    text = (REPO_ROOT / "docs" / "nri-plugin-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (example,) = [b for b in blocks if "Stub(" in b]
    return str(example)


def test_docs_plugin_adjusts_cpu_shares(tmp_path: Path) -> None:
    source = docs_example()
    assert len(source.strip().splitlines()) <= 12
    definitions, run_line = source.split("asyncio.run(")
    namespace: dict[str, object] = {}
    exec(definitions, namespace)  # noqa: S102 - our own documentation
    plugin = namespace["Shares"]()  # type: ignore[operator]

    async def scenario() -> None:
        runtime = FakeRuntime()
        await runtime.listen(tmp_path / "nri.sock")
        stub = Stub(plugin, name="shares", index="10", socket_path=tmp_path / "nri.sock")
        task = asyncio.create_task(stub.run())
        session = await runtime.next_session()
        reply = await session.create_container(api.PodSandbox(), api.Container())
        assert reply.adjust.linux.resources.cpu.shares.value == 512
        stub.stop()
        await task
        await runtime.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert 'Stub(Shares(), name="shares", index="10").run()' in run_line
