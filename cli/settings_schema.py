"""The settings-file command: settings-schema (the JSON Schema of ``flowtrain.toml``)."""

from __future__ import annotations

import argparse
import json

from settings.settings_file import settings_schema


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("settings-schema", help="print the JSON Schema of the settings file (flowtrain.toml)")
    p.set_defaults(handler=cmd_settings_schema)


def cmd_settings_schema(args: argparse.Namespace) -> int:
    print(json.dumps(settings_schema(), indent=2))
    return 0
