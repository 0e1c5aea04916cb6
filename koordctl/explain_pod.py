"""``koordctl explain POD --manager URL --scheduler URL``: after koordlet's part, what
koord-manager's admission webhooks and koord-scheduler's extender bind decided for the pod,
from their read-only ``GET /explain/pods/{namespace}/{name}`` (on their metrics servers).

Each part that cannot be had prints one line on stderr and makes the exit code 1; the others
are still printed. Without either URL (flags or $KOORD_MANAGER_URL, $KOORD_SCHEDULER_URL),
``koordctl explain POD`` is koordlet's part alone, as before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
from typing import Any

from koordctl import client

MANAGER_ENV = "KOORD_MANAGER_URL"
SCHEDULER_ENV = "KOORD_SCHEDULER_URL"
PROG = "koordctl explain"


def _when(ts: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(float(ts)))


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + "s" * (n != 1)


def render_manager(data: dict[str, Any]) -> str:
    """koord-manager's admission decisions for the pod; KeyError, TypeError or ValueError for
    an answer of another shape."""
    actions = data["actions"]
    if not actions:
        return (
            f"manager: no admission decision recorded for {data['pod']} (the replica that "
            f"answered keeps its last {data['capacity']} that mutated or denied)"
        )
    lines = [f"manager: {_count(len(actions), 'admission decision')} for {data['pod']}"]
    for action in actions:
        got = action["inputs"]
        who = got.get("user") or "<unknown user>"
        if got.get("groups"):
            who += f" ({got['groups']})"
        dry = " (dry run)" * (got.get("dry_run") == "true")
        head = f"  {_when(action['ts'])} {action['strategy']} {action['kind']}"
        head += f" {got.get('operation', '')}{dry} by {who}"
        if action["kind"] == "denied":
            lines.append(f"{head}: HTTP {action['value']}: {action['reason']}")
            continue
        lines.append(f"{head}: {action['reason']}")
        if action.get("byGenerateName"):
            lines.append(
                f"    matched by generateName {got.get('generateName', '')}: may be a sibling "
                "pod of the same owner"
            )
        lines.append(f"    patch {action['value']}")
    return "\n".join(lines)


def render_scheduler(data: dict[str, Any]) -> str:
    """koord-scheduler's extender binds of the pod; KeyError, TypeError or ValueError for an
    answer of another shape."""
    actions = data["actions"]
    if not actions:
        return (
            f"scheduler: no extender bind recorded for {data['pod']} (the replica that "
            f"answered keeps its last {data['capacity']}; a pod kube-scheduler bound itself "
            "never reaches it)"
        )
    lines = [f"scheduler: {_count(len(actions), 'extender bind')} for {data['pod']}"]
    for action in actions:
        preposition = "to" if action["kind"] == "bound" else "on"
        lines.append(
            f"  {_when(action['ts'])} {action['kind']} {preposition} {action['value']}: "
            f"{action['reason']}"
        )
    return "\n".join(lines)


RENDERERS = {
    "manager": ("koord-manager", render_manager),
    "scheduler": ("koord-scheduler", render_scheduler),
}


def urls(args: argparse.Namespace) -> dict[str, str]:
    """The parts asked for: "manager" and/or "scheduler" → base URL."""
    found = {
        "manager": getattr(args, "manager", None) or os.environ.get(MANAGER_ENV),
        "scheduler": getattr(args, "scheduler", None) or os.environ.get(SCHEDULER_ENV),
    }
    return {part: url for part, url in found.items() if url}


def pod_of(koordlet: dict[str, Any] | None, asked: str) -> tuple[str, str, str] | None:
    """(namespace, name, uid): koordlet's answer names the pod; else ``asked`` if it is
    NAMESPACE/NAME."""
    if koordlet is not None:
        with_keys = all(isinstance(koordlet.get(k), str) for k in ("namespace", "name"))
        if with_keys:
            return koordlet["namespace"], koordlet["name"], str(koordlet.get("uid") or "")
    namespace, slash, name = asked.partition("/")
    if slash and namespace and name and "/" not in name:
        return namespace, name, ""
    return None


def part(component: str, url: str, pod: tuple[str, str, str]) -> tuple[Any, str]:
    """One component's answer and its text; (None, "") after one line on stderr."""
    who, render = RENDERERS[component]
    namespace, name, uid = pod
    path = f"/explain/pods/{urllib.parse.quote(namespace, safe='')}/"
    path += urllib.parse.quote(name, safe="")
    if uid:
        path += "?" + urllib.parse.urlencode({"uid": uid})
    try:
        data = client.fetch_component(url, path, who)
        return data, render(data)
    except client.ComponentError as err:
        print(f"{PROG}: {who}: {err}", file=sys.stderr)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        print(
            f"{PROG}: {who} at {url} gave a bad answer ({type(err).__name__}: {err})",
            file=sys.stderr,
        )
    return None, ""


def control_plane_parts(
    args: argparse.Namespace, asked: dict[str, str], koordlet: dict[str, Any] | None
) -> tuple[dict[str, Any], bool]:
    """Print (unless --json) each asked part after koordlet's; the answers by part, and
    whether every part could be had."""
    pod = pod_of(koordlet, args.pod)
    if pod is None:
        print(
            f"{PROG}: cannot ask {' and '.join(RENDERERS[p][0] for p in asked)}: koordlet did not "
            f"say which pod {args.pod!r} is; give it as NAMESPACE/NAME",
            file=sys.stderr,
        )
        return dict.fromkeys(asked), False
    answers: dict[str, Any] = {}
    for component, url in asked.items():
        data, text = part(component, url, pod)
        answers[component] = data
        if text and not args.json:
            print(text, flush=True)
    return answers, all(data is not None for data in answers.values())


def explain_pod(args: argparse.Namespace, render_koordlet: Any) -> int:
    """koordlet's part, then the asked control-plane parts; exit 1 when any part is missing."""
    asked = urls(args)
    koordlet: dict[str, Any] | None = None
    try:
        path = "/api/v1/explain?" + urllib.parse.urlencode({"pod": args.pod})
        koordlet = client.fetch(args.addr, path)
    except client.KoordletUnreachable as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        if not asked:
            return 1
    if not asked:
        print(json.dumps(koordlet) if args.json else render_koordlet(koordlet))
        return 0
    if koordlet is not None and not args.json:
        print(render_koordlet(koordlet), flush=True)
    answers, complete = control_plane_parts(args, asked, koordlet)
    if args.json:
        print(json.dumps({"pod": koordlet, **answers}))
    return 0 if koordlet is not None and complete else 1
