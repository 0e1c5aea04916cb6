"""``koordctl query``: aggregates of a metric over a window (avg, p50 ... p99, last, count)."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse

from koordctl import client


def run(args: argparse.Namespace) -> int:
    params = {"metric": args.metric, "window": args.window, "agg": args.agg}
    for label in args.label:
        key, sep, value = label.partition("=")
        if not sep:
            print(f"koordctl query: --label {label!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        params[f"label.{key}"] = value
    try:
        data = client.fetch(args.addr, "/api/v1/query?" + urllib.parse.urlencode(params))
    except client.KoordletUnreachable as err:
        print(f"koordctl query: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data))
    else:
        for item in data:
            labels = ",".join(f"{k}={v}" for k, v in sorted(item["labels"].items()))
            value = item[args.agg]
            print(f"{item['metric']}{{{labels}}} {args.agg}={value:.6g} count={item['count']}")
        if not data:
            print(f"no samples of {args.metric} in the last {args.window}")
    return 0
