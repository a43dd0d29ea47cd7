"""`pdlite plugins`: the installed plugins (entry-point group `pdlite.plugins`) and what each registered."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plugins", help="list installed plugins and what each registered")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pdlite.plugins import load_plugins
    from pdlite.registries import load_registries

    load_registries()
    plugins = load_plugins()
    if not plugins:
        print("no plugins installed (entry-point group 'pdlite.plugins')")
        return 0
    for name, info in plugins.items():
        state = "loaded" if info.loaded else f"FAILED: {info.error}"
        print(f"{name} ({info.value}): {state}")
        for kind, items in info.registered.items():
            print(f"  {kind} ({len(items)}):")
            for it in items:
                print(f"    {it}")
        if info.loaded and not info.registered:
            print("  (registered nothing)")
    return 0
