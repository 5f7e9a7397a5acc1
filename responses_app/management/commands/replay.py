"""`manage.py replay FILE.sse`: a captured stream in, the assembled truth out. Needs no database."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from responses_app.streaming.replay import replay_bytes


class Command(BaseCommand):
    help = "Replay a captured Responses API SSE stream through the decoder and assembler."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="an .sse capture ('-' for standard input)")
        parser.add_argument("--json", action="store_true", help="print the assembled Response as JSON")
        parser.add_argument("--view", action="store_true", help="print the view model as JSON")
        parser.add_argument("--chunk-size", type=int, default=None, help="feed the bytes in N-byte pieces")
        parser.add_argument("--repeat", type=int, default=1, help="replay N times; events/s on stderr")

    def handle(self, *args: Any, **options: Any) -> None:
        chunk_size, repeat = options["chunk_size"], options["repeat"]
        if chunk_size is not None and chunk_size <= 0:
            raise CommandError("--chunk-size must be positive")
        if repeat <= 0:
            raise CommandError("--repeat must be positive")
        try:
            data = sys.stdin.buffer.read() if options["file"] == "-" else Path(options["file"]).read_bytes()
        except OSError as exc:
            self.stderr.write(f"replay: cannot read {options['file']}: {exc.strerror or exc}")
            sys.exit(2)

        started = time.perf_counter()
        for _ in range(repeat):
            result = replay_bytes(data, chunk_size)
        elapsed = time.perf_counter() - started

        if options["json"]:
            self.stdout.write(orjson.dumps(result.response, option=orjson.OPT_INDENT_2).decode())
        if options["view"]:
            self.stdout.write(orjson.dumps(result.view, option=orjson.OPT_INDENT_2).decode())
        if repeat > 1:
            rate = result.events * repeat / elapsed if elapsed else float("inf")
            self.stderr.write(f"{result.events} events x {repeat} in {elapsed:.3f}s: {rate:,.0f} events/s")
        for problem in result.problems:
            self.stderr.write(f"replay: {problem.kind}: {problem.message}")
        if result.events == 0 and not result.problems:
            self.stderr.write("replay: no events in input (is it an SSE stream?)")
            sys.exit(2)
        if not result.terminal:
            self.stderr.write(
                f"replay: stream ended without a terminal event (status {result.status or 'unknown'}, "
                f"{result.events} events)"
            )
            sys.exit(3)
