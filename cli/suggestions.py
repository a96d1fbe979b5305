"""The nearest command or option to a mistyped one: argparse's errors, with "did you mean"."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Final

_INVALID_CHOICE: Final = re.compile(
    r"invalid choice: '?(?P<word>[^' ]*)'? \(choose from (?P<choices>.*)\)"
)
_UNRECOGNIZED: Final = "unrecognized arguments: "


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known word closest to ``word``, if one is close enough to be a typo."""
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(message: str, parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """`` (did you mean 'send'?)``-style hint for an argparse error ``message``, or None.

    ``parser`` is the one that raised it, ``argv`` what the root parser was given: an
    unknown option is looked up among the options of the command it follows.
    """
    choice = _INVALID_CHOICE.search(message)
    if choice is not None:
        choices = [c.strip().strip("'") for c in choice["choices"].split(",")]
        found = nearest(choice["word"], choices)
    elif message.startswith(_UNRECOGNIZED):
        unknown = next(
            (t for t in message.removeprefix(_UNRECOGNIZED).split() if t.startswith("-")), None
        )
        if unknown is None:
            return None
        found = nearest(unknown.partition("=")[0], _options(_command_parser(parser, argv)))
    else:
        return None
    return None if found is None else f"did you mean {found!r}?"


def _command_parser(root: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command parser ``argv`` selects, following its command words."""
    parser = root
    for token in argv:
        commands = _commands(parser)
        if token in commands:
            parser = commands[token]
    return parser


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
    ]
