"""`manage.py sim_record --out tests/fixtures/sim/`: record every scenario to an .sse file.

Fixed seed, no pacing, in-process (no server): the project's fixtures come from its simulator.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from responses_app.simulator import create_app
from responses_app.simulator.inprocess import request
from responses_app.simulator.scenarios import SCENARIOS

SEED = "7"
PROMPT = "Tell me something interesting."


def _payload(model: str, **extra: Any) -> dict[str, Any]:
    metadata = {"sim.seed": SEED, "sim.tokens_per_s": "0"}
    if model == "sim-long":
        metadata["sim.tokens"] = "400"  # keep the committed fixture small
    return {"model": model, "input": PROMPT, "stream": True, "metadata": metadata, **extra}


async def record(out: Path) -> list[Path]:
    app = create_app()
    written: list[Path] = []

    async def one(name: str, payload: dict[str, Any]) -> bytes:
        status, data = await request(app, "POST", "/v1/responses", payload)
        if status != 200:
            raise CommandError(f"{name}: HTTP {status}: {data[:200]!r}")
        path = out / f"{name}.sse"
        path.write_bytes(data)
        written.append(path)
        return data

    for model in SCENARIOS:
        data = await one(model, _payload(model))
        if model in ("sim-function", "sim-parallel-functions"):
            final = json.loads(data.rstrip().rsplit(b"\ndata: ", 1)[-1])["response"]
            outputs = [
                {
                    "type": "function_call_output",
                    "call_id": item["call_id"],
                    "output": json.dumps({"temperature_c": 21, "sky": "clear"}),
                }
                for item in final["output"]
                if item["type"] == "function_call"
            ]
            await one(
                f"{model}.tool-result",
                _payload(model, input=outputs, previous_response_id=final["id"]),
            )
    return written


class Command(BaseCommand):
    help = "Record every simulator scenario (seed 7, no pacing) to .sse files."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--out", default="tests/fixtures/sim", help="directory for the .sse files"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        for path in asyncio.run(record(out)):
            self.stdout.write(f"{path} ({path.stat().st_size} bytes)")
