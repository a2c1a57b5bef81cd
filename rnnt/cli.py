"""The command line of every tool: one parser shape, so that --help reads the same everywhere, and one
ending for the stage tools of steps/: a summary line on success, one line naming what failed otherwise."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import NoReturn


def module_usage(argv: list[str], doc: str, arguments_right: bool) -> int | None:
    """For a module run as a tool by the recipes (python3 -m rnnt....; its docstring shows how on lines that start
    'python3 -m'): -h or --help prints the docstring and those lines on standard output, exit status 0, as every
    tool's --help; arguments that are not right print the lines on standard error, exit status 2; None: go on."""
    usage = "usage:\n" + "\n".join(line for line in doc.splitlines() if line.strip().startswith("python3 -m "))
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{doc.strip()}\n\n{usage}")
        return 0
    if not arguments_right:
        print(usage, file=sys.stderr)
        return 2
    return None


def tool_parser(doc: str, example: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """An argument parser whose --help prints the tool's docstring as written, then 'example: EXAMPLE'.
    prog: the name users run, where a shell wrapper runs the module (utils/fix_data_dir.sh). An option shortened
    is refused, as Kaldi's scripts refuse it (--short ran as --shortest; a new option would make it mean another)."""
    return argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=f"example: {example}" if example else None, allow_abbrev=False)


def at_least(low: int | float) -> Callable[[str], int | float]:
    """An argparse type: a whole number of at least low (an int), or a number (low a float); anything else is
    argparse's one-line usage error naming the option, not a traceback from deep in the tool (--threads -1,
    --tail-seconds -1)."""
    return _bounded(low, lambda value: value >= low, f"at least {low:g}")


def above(low: float) -> Callable[[str], float]:
    """An argparse type: a number more than low (--chunk-seconds 0 was one-sample chunks)."""
    return _bounded(float(low), lambda value: value > low, f"above {low:g}")


def above_up_to(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number more than low and at most high (--chunk-seconds 1e9: a chunk read whole from a
    pipe, a MemoryError)."""
    return _bounded(float(low), lambda value: low < value <= high, f"above {low:g} and at most {high:g}")


def _bounded(low: int | float, fits: Callable[[int | float], bool], bound: str) -> Callable[[str], int | float]:
    kind, what = (int, "a whole number") if isinstance(low, int) else (float, "a number")

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or not fits(value):
            raise argparse.ArgumentTypeError(f"expected {what} {bound}, got '{text}'")
        return value

    return parse


def number_list(low: float | None = None) -> Callable[[str], list[float]]:
    """An argparse type: finite numbers separated by commas (each at least low, where given). A nan searched a
    point whose every total was nan (combine_nbest.py's --grid: written to weights.yaml as .nan)."""
    def parse(text: str) -> list[float]:
        try:
            values = [float(x) for x in text.split(",")]
        except ValueError:
            values = None
        if values is None or not all(math.isfinite(v) and (low is None or v >= low) for v in values):
            bound = f" of at least {low:g}" if low is not None else ""
            raise argparse.ArgumentTypeError(f"expected finite numbers{bound} separated by commas, got '{text}'")
        return values

    return parse


def glued_values(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """argv with each of these options and the word after it joined as '--name=value': a value that starts with
    '-' (a suffix '-x', validation options '--no-wav') reads as Kaldi's parse_options.sh reads it."""
    glued: list[str] = []
    words = iter(argv)
    for word in words:
        glued.append(word if word not in options else f"{word}={next(words, '')}")
    return glued


def parse_intermixed(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """parser.parse_intermixed_args (options between positionals: 'exp --stream a.wav'), with '--' as Kaldi's and
    every tool's: each word after it a positional (of no type), '-dash.wav' too (Python 3.11's intermixed parse
    took a word after '--' that starts with '-' for an unknown option where the '--' came before the first
    positional)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return parser.parse_intermixed_args(argv)
    cut = argv.index("--")
    after = argv[cut + 1:]
    stand_ins = [f"\0{number}" for number in range(len(after))]  # no option starts so, nor any path holds a NUL
    args = parser.parse_intermixed_args(argv[:cut] + stand_ins)
    words = dict(zip(stand_ins, after))
    for name, value in vars(args).items():
        if isinstance(value, list):
            setattr(args, name, [words.get(word, word) for word in value])
        elif isinstance(value, str):
            setattr(args, name, words.get(value, value))
    return args


def id_affix(text: str) -> str:
    """An argparse type: a prefix or suffix of Kaldi ids, which hold no whitespace (one split every line it was
    put in, found only when the copy was validated)."""
    if any(ch.isspace() for ch in text):
        raise argparse.ArgumentTypeError(f"'{text}' holds whitespace, which no Kaldi id may")
    return text


class ToolError(Exception):
    """What stops a stage tool, in one line that names the file (and line) at fault: run_tool prints it."""


def error_line(error: Exception) -> str:
    """An error as a tool's line says it: an OSError of a file as '<file>: <why>' (as Kaldi's tools and the shell
    say it; Python's own is "[Errno 2] No such file or directory: 'x'"), any other as its message."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}{f' -> {error.filename2}' if error.filename2 is not None else ''}: {error.strerror}"
    return str(error)


def cannot_write(path: str, what: str, error: OSError) -> ToolError:
    """'<path>: cannot write <what> (<why>)', to raise for an output not written (a folder of its name, a full disk,
    no permission): its reason as the shell says it, not Python's "[Errno 21] Is a directory: '<path>.tmp'"."""
    return ToolError(f"{path}: cannot write {what} ({error.strerror or error})")


def check_out_dir(path: str) -> None:
    """An OUT_DIR argument that names a file is refused before any work (os.makedirs said "[Errno 17] File exists",
    or a traceback came after the whole decode or scoring)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ToolError(f"{path}: exists and is not a folder; give OUT_DIR a folder's name")


def show_data_reports() -> None:
    """The data pipeline's log lines on standard error after the tool's name: each pass's data report (INFO: what
    it read, resampled and dropped, as a clip too short for the encoder, which the decode then names as not
    decoded) and the audio it skipped (WARNING), which without this reached standard error bare, the report never."""
    logger = logging.getLogger("rnnt.data")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{os.path.basename(sys.argv[0])}: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


class OutputError(OSError):
    """Standard output could not be written (a full disk, a quota, an I/O error): the tool's results, not any
    input of it, failed."""


class _CheckedOutput:
    """Standard output whose write errors but a closed pipe's are OutputError (one a tool's loop over its inputs
    caught as its audio's, a full disk made every file 'bad' in turn)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._checked(self._stream.write, text)

    def flush(self) -> None:
        self._checked(self._stream.flush)

    def _checked(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(error.errno, error.strerror, "standard output") from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def exit_with(main: Callable[[], int]) -> NoReturn:
    """sys.exit(main()) for a tool that writes its results to standard output, where a reader that stops early
    (| head) ends it quietly with status 141, a shell's for SIGPIPE, as Kaldi's Perl filters end, not in a
    traceback, and an output that cannot be written (a full disk) ends it with status 1 and one line saying so."""
    sys.stdout = _CheckedOutput(sys.stdout)
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(141)
    except OutputError as error:
        _quiet_stdout()
        print(f"{os.path.basename(sys.argv[0])}: cannot write the results to standard output: {error.strerror}",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


def exit_from(main: Callable[[list[str]], int], argv: list[str]) -> NoReturn:
    """sys.exit(main(argv)) for a data-dir tool of utils/ (validate_data_dir.sh, ...): an OSError of a file that
    main lets through (a table it cannot read: no permission, a folder of its name) is one line naming the file,
    exit 1, not a traceback."""
    try:
        status = main(argv)
    except OSError as error:
        print(f"{os.path.basename(sys.argv[0])}: {error_line(error)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


def _quiet_stdout() -> None:
    """Standard output sent to /dev/null: Python's own flush at exit would fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run_tool(main: Callable[[], str]) -> NoReturn:
    """Runs a stage tool's main, which returns the tool's summary line: prints 'tool.py: SUMMARY' and exits
    0; when main raises ToolError, prints 'tool.py: MESSAGE' on standard error and exits 1."""
    name = os.path.basename(sys.argv[0])
    try:
        summary = main()
    except ToolError as error:
        print(f"{name}: {error}", file=sys.stderr)
        sys.exit(1)
    print(f"{name}: {summary}", flush=True)
    sys.exit(0)


def json_line(row: dict) -> str:
    """A JSON line of row, its text as it is, but where a string keeps bytes that are not UTF-8 (a file's name,
    which Python holds as surrogates): then \\u escapes, valid JSON (json.loads and os.fsencode give the bytes
    back), where the bytes themselves made the line no UTF-8 and no JSON."""
    text = json.dumps(row, ensure_ascii=False)
    return text if text.isascii() or not any("\udc80" <= char <= "\udcff" for char in text) else json.dumps(row)
