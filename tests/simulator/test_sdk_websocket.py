"""openai-python 3.x's WebSocket client (`client.responses.connect`), an independent client of the
simulator's WebSocket mode. The suite runs openai 2.x; 3.x runs in its own environment
(tests/sdk3/venv.py), driven in a subprocess (tests/sdk3/client.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI
from tests.sdk3 import venv
from tests.simulator.helpers import DEV_API_KEY, FAST, SCENARIO_NAMES, body, parse, stream_raw

CLIENT = Path(__file__).resolve().parents[1] / "sdk3" / "client.py"


@pytest.fixture(scope="session")
def openai3() -> Path:
    try:
        venv.create()
    except (subprocess.SubprocessError, OSError) as exc:
        if IN_CI:
            pytest.fail(f"CI must have openai 3.x in {venv.venv_dir()}: {exc}")
        pytest.skip(f"no environment with openai 3.x could be made here: {exc}")
    return venv.python()


def drive(python: Path, simulator_url: str, batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    plan = {"base_url": simulator_url, "api_key": DEV_API_KEY, "batches": batches}
    done = subprocess.run([str(python), str(CLIENT)], input=json.dumps(plan), capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["version"].startswith("3."), result["version"]
    return result


def create(model: str, *, metadata: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": "Tell me something.", "metadata": {**FAST, **(metadata or {})}, **extra}


def test_the_sdk_reads_every_scenario_as_its_sse_stream(openai3: Path, simulator_url: str) -> None:
    runs = drive(openai3, simulator_url, [[create(model)] for model in SCENARIO_NAMES])["runs"]
    for model, events in zip(SCENARIO_NAMES, runs, strict=True):
        sse = parse(stream_raw(simulator_url, body(model)))
        if sse[-1]["type"] == "response.failed" and events[-1]["type"] == "error":
            sse = sse[:-1]  # the SDK's loop stops at sim-error's error event; the failed one follows
        assert events == sse, model


def test_lanes_errors_and_a_chain_on_one_connection(openai3: Path, simulator_url: str) -> None:
    first, second = drive(openai3, simulator_url, [
        [create("sim-function", stream_id="a", store=False),
         create("sim-text", stream_id="b", metadata={"sim.http_error": "429"})],
        [create("sim-text", stream_id="a", input="$outputs", previous_response_id="$last", store=False)],
    ])["runs"]
    lane_a = [e for e in first if e.get("stream_id") == "a"]
    refused = [e for e in first if e.get("stream_id") == "b"]
    assert lane_a[-1]["type"] == "response.completed" and len(lane_a) == len(first) - 1
    assert refused == [refused[0]] and refused[0]["type"] == "error" and refused[0]["status"] == 429
    assert refused[0]["error"]["code"] == "rate_limit_exceeded"
    assert {e["stream_id"] for e in second} == {"a"}
    answer = second[-1]["response"]
    assert second[-1]["type"] == "response.completed" and answer["previous_response_id"]
    assert "12 C" in answer["output"][-1]["content"][0]["text"], "the store: false chain known to its connection"
