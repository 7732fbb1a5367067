"""The command-line interface. `main` is the console script: it runs the Typer app and turns every
det-k8s error into one `error:` line and an exit code, here and nowhere else.

This module imports nothing beyond the standard library's core at load time: `--version` is
printed before anything else is imported, the root help from a cache (`root_help.py`), and the
app imports only the module of the command that runs (`app.LazyGroup`).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported: `det-k8s --help` must not pay for it
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..errors import DetK8sError


def _report(exc: DetK8sError) -> None:
    from ..errors import SettingsError
    from . import output

    if isinstance(exc, SettingsError) and not exc.reported:
        for item in exc.problems:
            output.problem(item, stream=sys.stderr)
        return
    output.error(exc.message, exc.hint)


def _reader_left() -> int:
    """`det-k8s ... | head`: the reader left. Point stdout at /dev/null so the final flush cannot fail, exit 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return 0


def run_guarded(invoke: Callable[[], object], *, debug: bool = False) -> int:
    """Run `invoke` and map whatever it raises to a message and an exit code (the only place this happens).

    DetK8sError: its message and hint, its exit code. Usage errors from the option parser: one `error:` line
    in det-k8s's words (`usage.py`: what is wrong, and a helm or kubectl habit's pointer), exit 2. Ctrl-C:
    "interrupted", exit 130. Anything else is a bug in det-k8s: one line, exit 1, and the traceback only with
    --debug.
    """
    from typer import Abort
    from typer._click import exceptions as click_exceptions

    from .. import stopping
    from ..errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, DetK8sError

    try:
        result = invoke()
        return result if isinstance(result, int) else 0
    except DetK8sError as exc:
        if stopping.received() is not None:  # a consequence of the signal (helm stopped, an answer cut off)
            return stopping.exit_code()
        if debug:
            import traceback

            traceback.print_exc()
        _report(exc)
        return exc.exit_code
    except click_exceptions.NoArgsIsHelpError as exc:  # `det-k8s nodes`: the group's help, as asked
        exc.show()
        return EXIT_USAGE
    except click_exceptions.UsageError as exc:  # the parser's words made det-k8s's: one `error:` line (cli/usage.py)
        from .usage import usage_error

        _report(usage_error(exc))
        return EXIT_USAGE
    except click_exceptions.ClickException as exc:
        from . import output

        output.error(exc.format_message())
        return EXIT_USAGE if exc.exit_code == 2 else exc.exit_code
    except Abort as exc:
        interrupted = isinstance(exc.__context__ or exc.__cause__, KeyboardInterrupt)
        if stopping.received() is not None:
            return stopping.exit_code()  # `main` says what was undone, in one line
        print("interrupted" if interrupted else "aborted", file=sys.stderr)
        return EXIT_INTERRUPTED if interrupted else EXIT_FAILURE
    except KeyboardInterrupt:
        if stopping.received() is not None:
            return stopping.exit_code()
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_left()
    except SystemExit as exc:
        # Click turns EPIPE into `sys.exit(1)`; the reader leaving is not a failure of the command.
        if isinstance(exc.__context__, BrokenPipeError) or (
                isinstance(exc.__context__, OSError) and exc.__context__.errno == 32):
            return _reader_left()
        raise
    except Exception as exc:  # a bug in det-k8s: one line, unless --debug asks for the traceback
        if stopping.received() is not None:
            return stopping.exit_code()
        if debug:
            raise
        from . import output

        output.error(f"internal error: {type(exc).__name__}: {exc}", "run again with --debug for the traceback")
        return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Run det-k8s with `argv` (default: sys.argv[1:]) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # what the root option prints, without building the app (see app._version)
        from .. import __version__

        try:
            print(f"det-k8s {__version__}", flush=True)
        except BrokenPipeError:
            return _reader_left()
        return 0
    from .root_help import print_cached

    cached = print_cached(args)
    if cached is not None:
        return cached
    debug = "--debug" in args or os.environ.get("DET_K8S_DEBUG") == "1"
    import time

    from .. import stopping

    # SIGTERM, SIGINT, SIGHUP: one way to stop (det_k8s/stopping.py), from here on; the real process leaves on its
    # own should it still run after the grace and the last word (tests calling main share the process: never)
    restore = stopping.install(exit_on_hang=argv is None)
    code: int | None = None
    try:
        from typer import main as typer_main

        from .app import build_app, command_name, plain_metavars
        from .options import GlobalOptions, current, set_current

        started = time.monotonic()
        set_current(GlobalOptions())
        name = command_name(args)  # (only for the timing line: the app loads the command it runs, see LazyGroup)
        command = plain_metavars(typer_main.get_command(build_app()))
        code = run_guarded(lambda: command.main(args=args, prog_name="det-k8s", standalone_mode=False), debug=debug)
        if current().verbose >= 2 and stopping.received() is None:
            from . import output

            output.message(f"timing: det-k8s {name or ''}".rstrip() + f": {time.monotonic() - started:.2f} s in all "
                           f"(exit {code})")
    except KeyboardInterrupt:  # a signal while the command's own error was being reported
        pass
    finally:
        for _ in range(3):  # a signal taken in just before the mask is raised on the way in: do it all the same
            try:
                with stopping.blocked(last=True):  # no signal may cut this short: the private dirs hold secrets
                    stopping.sweep_private()
                    if stopping.received() is not None:
                        _say_stopped()
                        if argv is None:  # the real process: threads still waiting on an answer must not hold it up
                            stopping.exit_now(stopping.exit_code())
                    restore()
                break
            except KeyboardInterrupt:
                continue
    if stopping.received() is not None:
        code = stopping.exit_code()
        stopping.reset()
    return code if code is not None else 1


def _say_stopped() -> None:
    """The one line a stopped command ends with: the signal, what was undone, what is left and who cleans it."""
    import contextlib

    from .. import stopping
    from ..scrub_output import scrub

    signum = stopping.received()
    head = "interrupted" if signum == 2 else f"stopped by {stopping.name()}"
    if stopping.hurried():
        head += " (a second signal or the grace ran out: the undo was cut short)"
    notes = stopping.notes()
    with contextlib.suppress(OSError, ValueError):  # stderr closed: the exit code still says it
        print(scrub(head + (": " + "; ".join(notes) if notes else "")), file=sys.stderr, flush=True)
