"""Safety checkers: something that judges a window of text, with the text before it as context.

A checker is any object with a `name` and `async check(text, *, context, kind) -> Verdict`:

* `text` is the window being judged (a sentence, a paragraph or a bounded run of characters);
* `context` is up to RELAY_SAFETY_CONTEXT_CHARS of the text before it, already judged, so that a
  phrase split across deltas or windows is still caught. A checker must not flag text that lies
  wholly inside `context` (it was judged before): checks never run twice on the same text;
* `kind` is what the text is: "input" (the user's prompt), "output" (answer text),
  "tool_arguments" or "tool_output".

A flagged verdict may say where the violation starts (`start`, an offset into `context + text`):
the gate takes the answer back from there, earlier windows included, so no part of a phrase cut
by a window's end stays shown. Without it the gate takes back the context too.

`judge()` is how the relay calls one: with the timeout, and the error policy (`fail_open` passes,
`fail_closed` flags), timing it. A custom checker is a dotted path in RELAY_SAFETY_CHECKER to a
callable that returns a checker (it is called once per process with no arguments).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

Kind = Literal["input", "output", "tool_arguments", "tool_output"]


@dataclass(frozen=True, slots=True)
class Verdict:
    flagged: bool
    checker: str
    categories: tuple[str, ...] = ()
    error: str = ""  # the check could not be made (timeout, HTTP error ...); `flagged` then follows the policy
    elapsed: float = 0.0  # seconds the check took
    # Where the violation starts, an offset into `context + text`; None when the checker cannot
    # tell (the gate then takes back the context too: the flagged words may lie there).
    start: int | None = None

    @property
    def result(self) -> str:
        """passed | flagged | error: the label of relay_safety_verdicts_total."""
        return "error" if self.error else ("flagged" if self.flagged else "passed")


class Checker(Protocol):
    name: str

    async def check(self, text: str, *, context: str = "", kind: Kind = "output") -> Verdict: ...


class RulesChecker:
    """Case-insensitive regular expressions; a match counts when it reaches into `text`."""

    name = "rules"

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns: list[re.Pattern[str]] = []
        for pattern in patterns:
            pattern = pattern.strip()
            if not pattern:
                continue
            try:
                self.patterns.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ValueError(f"RELAY_SAFETY_RULES: {pattern!r} is not a regular expression: {exc}") from exc

    def matches(self, text: str, context: str = "") -> tuple[tuple[str, ...], int | None]:
        """The rules that match, and where the earliest match that reaches into `text` starts
        (an offset into `context + text`)."""
        whole = context + text
        start = len(context)
        found = []
        earliest: int | None = None
        for pattern in self.patterns:
            for match in pattern.finditer(whole):
                if match.end() > start and match.end() > match.start():
                    found.append(f"rule:{pattern.pattern}")
                    earliest = match.start() if earliest is None else min(earliest, match.start())
                    break
        return tuple(found), earliest

    def categories(self, text: str, context: str = "") -> tuple[str, ...]:
        return self.matches(text, context)[0]

    async def check(self, text: str, *, context: str = "", kind: Kind = "output") -> Verdict:
        categories, start = self.matches(text, context)
        return Verdict(flagged=bool(categories), checker=self.name, categories=categories, start=start)


async def judge(checker: Checker, text: str, *, context: str = "", kind: Kind = "output",
                timeout: float, fail_closed: bool) -> Verdict:
    """One check with its timeout and error policy; never raises for the checker's failures."""
    started = time.perf_counter()
    try:
        verdict = await asyncio.wait_for(checker.check(text, context=context, kind=kind), timeout)
    except TimeoutError:
        verdict = Verdict(flagged=fail_closed, checker=checker.name, error=f"timeout after {timeout:g} s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a checker's bug or its service's failure is a verdict, not a crash
        verdict = Verdict(flagged=fail_closed, checker=checker.name, error=f"{type(exc).__name__}: {exc}"[:500])
    return replace(verdict, elapsed=time.perf_counter() - started)


_checker: Checker | None = None
# Checkers that need the network are loaded the way a custom one is, by path: this module is the
# contract they implement, and does not depend on any of them.
BUILT_IN_FACTORIES = {"moderation": "responses_app.safety.moderation.moderation_checker"}


def checker_from_settings() -> Checker:
    """The process's checker, built once from RELAY_SAFETY_CHECKER: `rules`, `moderation`, or a
    dotted path to a callable that takes no arguments and returns a checker."""
    global _checker
    if _checker is None:
        from ..conf import app_settings

        name = app_settings.SAFETY_CHECKER
        if name == "rules":
            _checker = RulesChecker(app_settings.SAFETY_RULES)
        else:
            _checker = custom_checker(BUILT_IN_FACTORIES.get(name, name))
    return _checker


def custom_checker(path: str) -> Checker:
    """RELAY_SAFETY_CHECKER's factory, called once; ImproperlyConfigured when it cannot be used."""
    from django.core.exceptions import ImproperlyConfigured
    from django.utils.module_loading import import_string

    try:
        factory = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"RELAY_SAFETY_CHECKER {path!r} does not import: {exc}") from exc
    if not callable(factory):
        raise ImproperlyConfigured(f"RELAY_SAFETY_CHECKER {path!r} is not callable")
    checker = factory()
    name = getattr(checker, "name", None)
    if not isinstance(name, str) or not name or not inspect.iscoroutinefunction(getattr(checker, "check", None)):
        raise ImproperlyConfigured(
            f"RELAY_SAFETY_CHECKER {path!r} returned {checker!r}, which is not a checker: it needs a `name` "
            "(a non-empty string) and an async `check(text, *, context, kind)`")
    return checker  # type: ignore[no-any-return]


def reset_checker() -> None:
    """Forget the process's checker (tests that change the settings call it)."""
    global _checker
    _checker = None
