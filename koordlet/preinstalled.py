"""koordlet launched by containerd as a pre-installed NRI plugin (``NN-koordlet``).

containerd starts the executable in its plugin folder with no arguments, the NRI socket on fd 3,
only NRI_PLUGIN_NAME/IDX/SOCKET in the environment and output sent to the null device. So the
settings come from koordlet.env (the file koordlet.service reads) and the log goes to a file.

With NRI v0.6.1 (containerd 1.7), a pre-installed plugin that fails to register makes containerd
exit. Whatever stops koordlet from starting (a bad flag, a broken install, an unreadable node)
is therefore logged, and a plugin that subscribes to nothing registers in its place.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import logging.handlers
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from koordapi import logsetup
from nri_plugin.stub import Stub, identity_from_env

log = logging.getLogger("koordlet.preinstalled")

DEFAULT_ENV_FILE = Path("/etc/koordlet/koordlet.env")
DEFAULT_LOG_FILE = Path("/var/log/koordlet/nri-plugin.log")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them (quotes removed, # comments)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 1 and "=" in words[0]:
            key, _, value = words[0].partition("=")
            values[key.strip()] = value
    return values


def setup_logging(path: Path, level: str = "info") -> None:
    handler: logging.Handler
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=10 << 20, backupCount=3)
    except OSError:
        handler = logging.StreamHandler(sys.stderr)  # nowhere, under containerd; still valid
    logsetup.configure(level, handler=handler)


class NoopPlugin:
    """Registers and changes nothing: containerd keeps running without koordlet's hooks.

    It subscribes to one notification whose errors containerd only logs, since a mask of 0
    would subscribe it to every event.
    """

    def remove_pod_sandbox(self, pod: object) -> None:
        return None


async def serve_noop(name: str, index: str) -> None:
    await Stub(NoopPlugin(), name=name, index=index).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koordlet.preinstalled", allow_abbrev=False)
    parser.add_argument("--env-file", type=Path, default=DEFAULT_ENV_FILE)
    options = parser.parse_args(argv)
    env: dict[str, str] = {}
    problem = None
    try:
        env = read_env_file(options.env_file)
    except (OSError, ValueError) as err:
        problem = f"cannot read {options.env_file}: {err}"
    os.environ.update({k: v for k, v in env.items() if k != "KOORDLET_ARGS"})
    setup_logging(Path(env.get("KOORDLET_LOG_FILE") or DEFAULT_LOG_FILE))
    name, index = identity_from_env()
    name, index = name or "koordlet", index or "00"
    if problem:
        log.warning("%s; koordlet starts with its defaults", problem)
    try:
        # Imported here: even a broken koordlet install must not keep the plugin from
        # registering.
        from koordlet.cli import build_parser, config_from_args  # noqa: PLC0415
        from koordlet.daemon import Koordlet  # noqa: PLC0415

        usage = io.StringIO()
        try:
            with contextlib.redirect_stderr(usage):  # stderr goes nowhere under containerd
                args = build_parser().parse_args(shlex.split(env.get("KOORDLET_ARGS", "")))
        except SystemExit:
            raise ValueError(f"KOORDLET_ARGS: {usage.getvalue().strip()}") from None
        logging.getLogger().setLevel(logsetup.level_number(args.log_level))
        config = replace(
            config_from_args(args), nri_enabled=True, nri_plugin_name=name, nri_plugin_index=index
        )
        daemon = Koordlet(config)
    except Exception as err:
        log.exception(
            "koordlet cannot start as NRI plugin %s-%s (%s); registering a plugin that does "
            "nothing so that containerd keeps running. Fix %s and restart containerd.",
            index,
            name,
            err,
            options.env_file,
        )
        asyncio.run(serve_noop(name, index))
        return 1
    log.info("koordlet started by containerd as NRI plugin %s-%s", index, name)
    try:
        asyncio.run(daemon.run())
    except Exception:
        if daemon.stub is not None and daemon.stub.registrations:
            log.exception("koordlet failed after registering; containerd carries on without it")
            return 1
        # Still unregistered, and the socket unused: containerd 1.7 would exit. Register.
        log.exception("koordlet failed before registering; registering a no-op plugin")
        asyncio.run(serve_noop(name, index))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
