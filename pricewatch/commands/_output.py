"""What the project's commands share about their output."""

from __future__ import annotations

import argparse
import os
import sys

from scrapy.commands import ScrapyHelpFormatter


def reader_went_away() -> None:
    """The reader of stdout closed the pipe (``scrapy frontier --show URL | head``): what it
    did not read is not wanted, which is no error. Point stdout at /dev/null so that the
    interpreter's last flush does not raise BrokenPipeError again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class HelpFormatter(ScrapyHelpFormatter):
    """Scrapy's help layout, without taking a wrapped help line that happens to end with a
    colon (``... (default:``) for a section heading: only unindented parts are headings."""

    def format_part_strings(self, part_strings: list[str]) -> list[str]:
        # Scrapy's own method, with `not startswith(" ")`: help text is indented by argparse.
        if part_strings and part_strings[0].startswith("usage: "):
            part_strings[0] = "Usage\n=====\n  " + part_strings[0].removeprefix("usage: ")
        headings = [
            i
            for i, part in enumerate(part_strings)
            if part.endswith(":\n") and not part.startswith(" ")
        ]
        for index in reversed(headings):
            char = "-" if "Global Options" in part_strings[index] else "="
            part_strings[index] = part_strings[index].removesuffix(":\n").title()
            part_strings.insert(index + 1, f"\n{char * len(part_strings[index])}\n")
        return part_strings


def use_help_formatter(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = HelpFormatter
