"""The ``quicbed`` command. Each subcommand lives in its own module with a ``register``."""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
import textwrap

from quicbed import __version__
from quicbed.errors import QuicbedError

# Module name under quicbed.cli for each subcommand, in --help order.
COMMANDS = ("run", "topo", "transports", "trace", "doctor", "clean", "vm", "uml", "report", "compare", "merge", "lab")

DESCRIPTION = """\
quicbed: emulate WiFi, mesh and lossy networks and compare QUIC, BQUIC and TCP on them.

Typical session:
  quicbed doctor                          what this machine can emulate
  quicbed topo show topologies/dumbbell.py -p delay=20ms
  quicbed run experiments/quickstart.yaml results land in results/
  quicbed transports                      the names a matrix's transport axis takes
  quicbed trace info step-drop.down       delivery traces for trace-driven links
  quicbed report results/quickstart-...   summary of a results folder
  quicbed compare before/ after/            two results folders, cell by cell
  quicbed merge shard1/ shard2/ --out all/  join shards run on several machines
  quicbed lab list                        teaching labs with automatic checks
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quicbed", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"quicbed {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"quicbed.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"quicbed.cli.{name}":
                raise
            continue  # a subcommand this installation does not ship
        module.register(subparsers)
    _accept_debug_everywhere(parser)
    return parser


class WholeWordsFormatter(argparse.HelpFormatter):
    """argparse's help, without breaking '--no-vm' or '--dry-run' at their hyphens."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )


def _accept_debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after a (sub)subcommand too: 'quicbed run X --debug' is what people type;
    and help text that keeps options whole (unless a command lays its text out itself)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                if child.formatter_class is argparse.HelpFormatter:
                    child.formatter_class = WholeWordsFormatter
                if not any("--debug" in option.option_strings for option in child._actions):
                    # SUPPRESS: an absent flag leaves the top-level value (False, or True if given there)
                    child.add_argument(
                        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
                    )
                _accept_debug_everywhere(child)


#: what to do about the system's refusals users meet with their own paths
OS_ERROR_FIXES = {
    errno.ENAMETOOLONG: "use a shorter name: a file name is at most 255 bytes, a path 4095",
    errno.ENOSPC: "free space on that file system, or write elsewhere",
    errno.EDQUOT: "free space within your quota, or write elsewhere",
    errno.EACCES: "use a folder you may write to, or change its permissions",
    errno.EPERM: "use a folder you may write to, or change its permissions",
    errno.EROFS: "that file system is read-only: write elsewhere",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "choose another name, or move that one away",
}


def describe_os_error(error: OSError) -> str:
    """'PATH: File name too long (fix: ...)', one line."""
    where = f"{error.filename}: " if error.filename else ""
    fix = OS_ERROR_FIXES.get(error.errno or 0)
    return f"{where}{error.strerror or error}" + (f" (fix: {fix})" if fix else "")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except QuicbedError as error:
        if args.debug:
            raise
        print(f"quicbed: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. 'quicbed run X --dry-run | head': the reader left, not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a user's path the system refused (too long, no space, no permission)
        if args.debug:
            raise
        print(f"quicbed: error: {describe_os_error(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("quicbed: interrupted; everything this run started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
