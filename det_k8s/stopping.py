"""SIGTERM, SIGINT and SIGHUP, ending every command the same way (one place: `cli.main` installs this).

The first signal becomes a `Stopped` exception raised in the main thread (a `KeyboardInterrupt`, so every
cleanup path written for Ctrl-C runs: the Lease is released by `SchedulingLease.held`, a half-created group
deleted by `create_group`, a half-bound one by the binder, helm's process group ended by `tools/process.py`,
the private chart directory removed by its `finally`). From then on the command has `GRACE_SECONDS` to
finish undoing; what it undid or leaves behind it says with `note()`, and `main` prints it as one line and
exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

A second signal, or the grace running out, raises `Stopped` again with `hurried` set: the undo in progress
is cut short (what it leaves, the intent records say, and the next det-k8s pass finishes). The private
directories holding secrets (`private_dir()`) are removed last in `main` with every signal blocked, so no
second signal can keep a secret on disk.

A signal's exception that Python would drop (the handler ran inside a finalizer: a `__del__`, a weakref callback, a
generator the garbage collector closes) is raised again a moment later in the main thread (`sys.unraisablehook`).

`shielded()` defers the first signal over a short write that must not be torn in half (a queue entry's
intent record): it is raised when the block ends.

The real process (`install(exit_on_hang=True)`, what `cli.main` does for the console script) also has a last word:
should its main thread still not have ended `LAST_WORD_SECONDS` after the grace ran out (stuck where no exception
reaches it, or one swallowed where Python drops what a finalizer raises), a timer thread ends its children, removes
the private directories, says so in one line and leaves with 128 + the signal's number, as `kill -9` would but
without a secret left on disk. What the cut-off command leaves, the next det-k8s finishes or undoes, as after a
`kill -9`. The in-cluster manifest's 45 s before SIGKILL covers the grace and the last word.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_SECONDS = 20.0  # from the first signal until the undo is cut short (the in-cluster manifest gives 45 s)
LAST_WORD_SECONDS = 10.0  # after the grace: how long a main thread that has still not ended is waited for
AFTER_HURRY_SECONDS = 5.0  # once the undo is cut: what still runs (outer cleanups) may take this long in all
NAMES: dict[int, str] = {int(signal.SIGINT): "SIGINT", int(signal.SIGTERM): "SIGTERM", int(signal.SIGHUP): "SIGHUP"}


class Stopped(KeyboardInterrupt):
    """A signal stopped det-k8s (see the module docstring)."""

    def __init__(self, signum: int, *, hurried: bool = False) -> None:
        super().__init__(NAMES.get(signum, f"signal {signum}"))
        self.signum = signum
        self.hurried = hurried

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    def __init__(self) -> None:
        self.installed = False
        self.signum: int | None = None
        self.deadline = float("inf")
        self.hurried = False
        self.hurried_at = 0.0  # (time.monotonic) when the undo was cut
        self.pending = False
        self.shield = 0
        self.block = 0
        self.redeliver = ""  # "armed": a lost raise is to be redelivered (`_later`); "sent": it was, just now
        self.raised: BaseException | None = None  # what the handler raised last (`_unraisable` knows it by identity)
        self.final = False  # `main`'s last cleanup has begun: no signal is sent to the main thread from here on
        self.notes: list[str] = []
        self.private: list[Path] = []
        self.children: Path | None = None
        self.timer: threading.Timer | None = None
        self.lock = threading.Lock()
        self.grace = GRACE_SECONDS
        self.last_word: float | None = None  # None: never leave on our own (in-process callers: the tests)
        self.unraisable: Callable[[Any], object] = sys.__unraisablehook__


_state = _State()


def _swallowed_here(frame: object) -> bool:
    """Whether an exception raised in `frame` would be lost: Python ignores (prints and drops) what a weakref callback
    raises, and the import system's module-lock callback is where a signal's handler was seen to run."""
    code = getattr(frame, "f_code", None)
    return code is not None and code.co_name == "cb" and "importlib" in code.co_filename


def _redeliver(signum: int) -> None:
    with _state.lock:
        if _state.installed and _state.redeliver == "armed" and not _state.final:
            _state.redeliver = "sent"  # (a real signal meanwhile cleared "armed": it was raised, and counted)
            signal.pthread_kill(threading.main_thread().ident or 0, signum)


def _later() -> None:
    """The signal's exception would be, or was, lost where it was raised: raise it again in 10 ms, in the main thread."""
    _state.redeliver = "armed"
    later = threading.Timer(0.01, _redeliver, args=(_state.signum,))
    later.daemon = True
    later.start()


def _unraisable(unraisable: Any) -> None:
    """`sys.unraisablehook`: Python dropped an exception that a finalizer (`__del__`, a weakref callback, a generator
    closed by the garbage collector) raised. Our signal's, raised there by the handler, is raised again a moment later
    where it is not lost (and nothing is printed); anything else goes to the hook installed before."""
    if (unraisable.exc_value is not None and unraisable.exc_value is _state.raised and _state.installed
            and threading.current_thread() is threading.main_thread()):
        _state.raised = None
        _later()
        return
    previous = _state.unraisable
    (sys.__unraisablehook__ if previous is _unraisable else previous)(unraisable)


def _handler(signum: int, frame: object) -> None:
    state = _state
    again, state.redeliver = state.redeliver == "sent", ""  # (again: our redelivery of a signal whose raise was lost)
    if state.signum is None:
        state.signum = signum
        state.deadline = time.monotonic() + state.grace
        state.timer = threading.Timer(state.grace, _grace_over)
        state.timer.daemon = True
        state.timer.start()
    elif not again and not state.hurried:
        state.hurried, state.hurried_at = True, time.monotonic()
    if state.hurried:
        if state.block:  # a signal Python had taken in just before the block masked it: it waits, as a blocked one does
            return
        if _swallowed_here(frame):
            _later()
            return
        state.raised = Stopped(state.signum, hurried=True)
        raise state.raised
    if state.shield or state.block:
        state.pending = True
        return
    if _swallowed_here(frame):  # raise it a moment later, where it is not lost
        _later()
        return
    state.raised = Stopped(state.signum)
    raise state.raised


def _grace_over() -> None:
    with _state.lock:
        if _state.installed and _state.signum is not None:
            if not _state.final:
                signal.pthread_kill(threading.main_thread().ident or 0, _state.signum)
            if _state.last_word is not None:
                _state.timer = threading.Timer(_state.last_word, _last_word)
                _state.timer.daemon = True
                _state.timer.start()


def _exit_soon(code: int) -> None:
    time.sleep(1.0)
    os._exit(code)


def _last_word() -> None:
    """The main thread did not end within the grace and the last word after it: leave from here (see the module
    docstring). Written with os.write, not print: the main thread may be stuck holding stderr's lock."""
    with _state.lock:
        if not (_state.installed and _state.last_word is not None and _state.signum is not None):
            return
        signum = _state.signum
        # (should a write below block, stderr being a full pipe nobody reads, the process leaves all the same)
        threading.Thread(target=_exit_soon, args=(128 + signum,), daemon=True).start()
        with contextlib.suppress(Exception):
            if _state.children is not None:
                _end_orphans(_state.children)  # our own children: ended as a successor would end a killed one's
        with contextlib.suppress(Exception):
            sweep_private()
        line = (f"det-k8s: still running {_state.grace + _state.last_word:.0f} s after {name(signum)}: leaving now; "
                "what was cut short, the next det-k8s finishes or undoes (as after kill -9)\n")
        with contextlib.suppress(OSError):
            os.write(2, line.encode())
            if faulthandler.is_enabled():  # PYTHONFAULTHANDLER=1 or -X faulthandler: where every thread was stuck
                faulthandler.dump_traceback(all_threads=True)
        os._exit(128 + signum)


def install(*, exit_on_hang: bool = False, grace: float = GRACE_SECONDS,
            last_word: float = LAST_WORD_SECONDS) -> Callable[[], None]:
    """Handle the signals (main thread only; elsewhere nothing changes). Returns what restores the previous ones.

    `grace`: seconds from the first signal until the undo is cut short. `exit_on_hang` (the real process only, never
    a caller sharing the process): leave `last_word` seconds after that if the main thread has still not ended."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    reset()
    _state.grace = grace
    _state.last_word = last_word if exit_on_hang else None
    sweep_stale(Path(tempfile.gettempdir()), "det-k8s-")  # what a det-k8s killed outright left (kill -9)
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    previous_hook = sys.unraisablehook
    if previous_hook is not _unraisable:  # (installed twice: the first one's predecessor stays the one called)
        _state.unraisable, sys.unraisablehook = previous_hook, _unraisable
    _state.installed = True

    def restore() -> None:
        with _state.lock:
            _state.installed = False
            if _state.timer is not None:
                _state.timer.cancel()
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            if sys.unraisablehook is _unraisable and previous_hook is not _unraisable:
                sys.unraisablehook = previous_hook

    return restore


def reset() -> None:
    """Forget a previous command's signal (one process may run several commands: the tests)."""
    if _state.timer is not None:
        _state.timer.cancel()
    _state.signum, _state.deadline, _state.hurried, _state.pending, _state.shield = None, float("inf"), False, False, 0
    _state.hurried_at = 0.0
    _state.block, _state.redeliver, _state.raised, _state.final = 0, "", None, False
    _state.notes = []
    _state.children = None


def received() -> int | None:
    """The signal that is stopping det-k8s, or None."""
    return _state.signum


def name(signum: int | None = None) -> str:
    """SIGTERM, SIGINT, SIGHUP: the signal's name (the one received without an argument)."""
    number = _state.signum if signum is None else signum
    return NAMES.get(number or 0, f"signal {number}")


def exit_code() -> int:
    """128 + the signal's number, as shells report a command a signal ended (1 when none came)."""
    return 128 + _state.signum if _state.signum is not None else 1


def hurried() -> bool:
    """A second signal came, or the grace ran out: undo only what is quick."""
    return _state.hurried


def after_hurry() -> float | None:
    """Once the undo was cut (`hurried`): the seconds left to whatever cleanup still runs (an outer `finally` giving
    the Lease back, lowering a fence), AFTER_HURRY_SECONDS in all; None before. No signal comes after the grace's
    to cut those, so each request and each wait bounds itself by this (`KubeApi`, `wait_limit`)."""
    if not _state.hurried:
        return None
    return _state.hurried_at + AFTER_HURRY_SECONDS - time.monotonic()


def wait_limit() -> float | None:
    """The timeout for a wait in a cleanup path: none before the undo is cut, what is left of AFTER_HURRY after."""
    left = after_hurry()
    return None if left is None else max(left, 0.0)


def remaining(limit: float | None = None) -> float:
    """Seconds of grace left (at most `limit`, the whole grace by default): how long an undo may still wait."""
    limit = _state.grace if limit is None else limit
    if _state.signum is None:
        return limit
    return max(0.0, min(limit, _state.deadline - time.monotonic()))


def check() -> None:
    """Raise `Stopped` if a signal came (for loops that must not start new work after it)."""
    if _state.signum is not None and not _state.shield:
        raise Stopped(_state.signum, hurried=_state.hurried)


def note(text: str) -> None:
    """Something a stopped command undid or leaves behind, for its last line (said only when a signal stopped it)."""
    if _state.signum is not None and text not in _state.notes:
        _state.notes.append(text)


def notes() -> tuple[str, ...]:
    return tuple(_state.notes)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Defer the first signal until the block ends (a second one still cuts in). Main thread only, as signals are:
    elsewhere (a worker renewing a credential) nothing changes, and the count is never touched by two threads."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.shield += 1
    try:
        yield
    finally:
        _state.shield -= 1
        if not _state.shield and _state.pending:
            _state.pending = False
            if _state.signum is not None:  # (a second signal came meanwhile, and cut the block: said so again)
                raise Stopped(_state.signum, hurried=_state.hurried)


def private_dir(prefix: str = "det-k8s-", parent: Path | None = None) -> Path:
    """A fresh 0700 directory for files holding secrets, removed by `remove_private` or at the latest by `main`.

    Its name carries this process's id (`<prefix><pid>-<random>`): what a process killed outright (kill -9) left
    in the same place, the next det-k8s that makes one there removes (`sweep_stale`).
    """
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep_stale(where, prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))
    _state.private.append(path)
    return path


def sweep_stale(where: Path, prefix: str) -> list[Path]:
    """Remove the private directories of det-k8s processes that ended without removing them (kill -9), ours only.

    A directory is stale when the process its name carries no longer exists; a process id in use again keeps it
    (the next sweep after that process ends removes it)."""
    removed: list[Path] = []
    try:
        candidates = [entry for entry in os.scandir(where) if entry.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in candidates:
        pid_text = entry.name[len(prefix):].partition("-")[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            _end_orphans(Path(entry.path) / CHILDREN)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


CHILDREN = "children"  # in a private directory: one file per running child's process group, holding its start time


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), "" when unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace").rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def child_started(pid: int) -> None:
    """Record a child that leads its own process group (tools/process.py), for a successor to end should det-k8s be
    killed outright while it runs (`sweep_stale`)."""
    start = _start_time(pid)
    if not start:
        return
    if _state.children is None:
        with contextlib.suppress(OSError):
            _state.children = private_dir() / CHILDREN
            _state.children.mkdir()
    if _state.children is not None:
        with contextlib.suppress(OSError):
            (_state.children / str(pid)).write_text(start, encoding="ascii")


def child_ended(pid: int) -> None:
    if _state.children is not None:
        with contextlib.suppress(OSError):
            (_state.children / str(pid)).unlink()


def _end_orphans(records: Path) -> None:
    """SIGKILL the process groups a killed det-k8s left running. Safe against reused ids: a process group's id is
    not given out again while any member lives, and when a process of that id runs it must be the recorded one."""
    try:
        entries = list(records.iterdir())
    except OSError:
        return
    for record in entries:
        if not record.name.isdigit():
            continue
        group = int(record.name)
        try:
            recorded = record.read_text(encoding="ascii").strip()
        except OSError:
            continue
        now = _start_time(group)
        if now and now != recorded:
            continue  # another process has that id now: not ours
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)


def remove_private(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(ValueError):
        _state.private.remove(path)


def sweep_private() -> None:
    """Remove every private directory still there (`main` calls it last, with every signal blocked)."""
    while _state.private:
        taken, _state.private = _state.private, []  # (taken whole: the last word's thread may sweep at the same time)
        for path in taken:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def blocked(*, last: bool = False) -> Iterator[None]:
    """No signal handled during the block (main thread only): for the cleanup a second signal must not cut.

    Masking the signals is not enough: one the kernel delivered just before is already taken in by Python and
    its handler runs at the next bytecode, inside the block. The handler then only records it: a second signal
    hurries what comes after the block; a first one is raised when the block ends (unless `last`: `main`'s final
    cleanup, after which nothing is left to stop)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if last:
        with _state.lock:  # no redelivery nor grace's signal sent after this: it would wait, masked, for the handlers
            _state.final = True  # given back (an in-process caller would then meet the default action)
    # counted first: CPython runs a handler taken in just before from inside pthread_sigmask itself (the new mask
    # already in place), and that handler must see the block and only record the signal
    _state.block += 1
    old: set[int | signal.Signals] | None = None
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        yield
    finally:
        _state.block -= 1
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        elif not _state.block:  # the mask call itself raised after blocking them (not from our handler: it sees the
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # block and only records): unblocked again
        if not last and not _state.block and not _state.shield and _state.pending and _state.signum is not None:
            _state.pending = False
            raise Stopped(_state.signum)


def exit_now(code: int) -> None:
    """Leave at once after a signal, when everything is cleaned: threads still waiting on an answer (a binding
    the API server holds) must not keep the process alive. Standard streams are flushed first."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
