"""det_k8s/stopping.py: a signal as an exception, private directories, and what a killed det-k8s leaves."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from det_k8s import stopping
from det_k8s.storage.probe import left_behind, run_probe
from det_k8s.storage.report import Failure, Reason, Step


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_sigterm_becomes_stopped_with_its_exit_code_and_a_second_one_hurries(handlers):
    with pytest.raises(stopping.Stopped) as first:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert first.value.exit_code == 143 and stopping.received() == signal.SIGTERM and not stopping.hurried()
    assert 0 < stopping.remaining() <= stopping.GRACE_SECONDS
    with pytest.raises(stopping.Stopped) as second:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert second.value.hurried and stopping.hurried() and stopping.exit_code() == 143  # the first signal's code


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_sigint_and_sighup_end_the_same_way(handlers, sig, code):
    with pytest.raises(KeyboardInterrupt):  # every Ctrl-C cleanup path runs for each of them
        os.kill(os.getpid(), sig)
        time.sleep(5)
    assert stopping.exit_code() == code


def test_a_shielded_block_finishes_before_the_signal_is_raised(handlers):
    done = []
    with pytest.raises(stopping.Stopped), stopping.shielded():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        done.append("released the lease")
    assert done == ["released the lease"]


def test_a_shielded_block_on_another_thread_neither_defers_a_signal_nor_raises_it_there(handlers):
    """A worker renewing a credential (tools/process.py) passes through `shielded()`: that must not defer the main
    thread's signal, nor raise it on the worker when its block ends (a watch thread would die of it)."""
    import threading

    inside, leave, raised = threading.Event(), threading.Event(), []

    def worker() -> None:
        try:
            with stopping.shielded():
                inside.set()
                leave.wait(10)
        except BaseException as exc:  # (what the worker's block raised: nothing)
            raised.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(10)
    try:
        with pytest.raises(stopping.Stopped):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
            time.sleep(5)
    finally:
        leave.set()
        thread.join()
    assert raised == []


def test_a_signal_python_took_in_just_before_a_blocked_cleanup_does_not_cut_it(handlers):
    """Issue 19 (found on the real-server harness): a second signal the kernel delivered just before `blocked()`
    masked it ran its handler at the next bytecode, inside the block, and cut main's last cleanup with a traceback.
    Calling the handler inside the block is what Python does then."""
    done = []
    with pytest.raises(stopping.Stopped):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    with stopping.blocked():
        stopping._handler(signal.SIGINT, None)  # the second signal, taken in before the mask
        done.append("removed the private directories")
    assert done and stopping.hurried() and stopping.exit_code() == 143
    stopping.reset()
    with pytest.raises(stopping.Stopped), stopping.blocked():  # a first one is raised once the block ends
        stopping._handler(signal.SIGTERM, None)
        done.append("ended helm's process group")
    assert len(done) == 2 and stopping.received() == signal.SIGTERM
    stopping.reset()
    with stopping.blocked(last=True):  # main's final cleanup: nothing is left to stop after it
        stopping._handler(signal.SIGTERM, None)
    assert stopping.received() == signal.SIGTERM


def test_a_signal_whose_handler_runs_in_an_import_lock_callback_is_raised_a_moment_later(handlers):
    """Python drops (prints as "Exception ignored") what a weakref callback raises: a SIGTERM whose handler ran in
    the import system's module-lock callback was lost, with a traceback on stderr (1 run in 80 of the harness)."""
    from types import SimpleNamespace

    frame = SimpleNamespace(f_code=SimpleNamespace(co_name="cb", co_filename="<frozen importlib._bootstrap>"))
    returned = []
    with pytest.raises(stopping.Stopped) as stopped:
        stopping._handler(signal.SIGTERM, frame)  # returns: nothing raised where it would be lost
        returned.append(True)
        time.sleep(5)
    assert returned and not stopped.value.hurried and stopping.exit_code() == 143


LOST = '''
import os, signal, sys, time
from det_k8s import stopping
stopping.install()
class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs here, inside a finalizer: what it raises, Python drops
for _ in range(int(sys.argv[1])):
    try:
        Finalized()
        if sys.argv[2:] == ["and-another"]:
            os.kill(os.getpid(), signal.SIGINT)  # the user's second signal, before the lost one is raised again
        time.sleep(5)
        print("lost", flush=True)
    except stopping.Stopped as stopped:
        print("raised", "hurried" if stopped.hurried else "first", flush=True)
'''


@pytest.mark.parametrize(("args", "said"), [(["1"], "raised first\n"), (["2"], "raised first\nraised hurried\n"),
                                           (["1", "and-another"], "raised hurried\n")])
def test_a_signal_whose_exception_a_finalizer_drops_is_raised_again(args, said):
    """A signal's handler that runs inside a `__del__` (or a weakref callback, or a generator the collector closes):
    Python prints what it raised as ignored and goes on, as if no signal had come. Raised again, a moment later, for
    the first signal and for the second (hurried) one, without the ignored traceback; a second signal of the user's
    before that is a second signal (hurried), not taken for the redelivery."""
    done = subprocess.run([sys.executable, "-c", LOST, *args], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert (done.stdout, done.stderr) == (said, "")


def test_installed_twice_and_given_back_twice_the_previous_unraisable_hook_is_back():
    """`main` called where the handlers are installed already (a test calling it): the hook it replaced stays the
    one an ordinary lost exception goes to, and comes back once both are given back."""
    before = sys.unraisablehook
    outer = stopping.install()
    inner = stopping.install()
    try:
        assert stopping._state.unraisable is before  # (never our own hook: it would call itself)
    finally:
        inner()
        outer()
        stopping.reset()
    assert sys.unraisablehook is before


FINAL = '''
import os, signal, time
from det_k8s import stopping
restore = stopping.install()
class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
Finalized()  # a command's last object: the signal's exception is lost as the command ends
with stopping.blocked(last=True):  # main's final cleanup, in-process (no exit_now)
    time.sleep(0.05)  # (the redelivery is due meanwhile)
    restore()
print("returned", stopping.received() == signal.SIGTERM, flush=True)
'''


def test_no_signal_is_sent_to_the_main_thread_once_mains_last_cleanup_began():
    """A redelivery (or the grace's signal) sent during `main`'s last cleanup waits, masked, until the handlers are
    given back, and then meets the default action: an in-process caller (pytest) would be killed by it."""
    done = subprocess.run([sys.executable, "-c", FINAL], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert (done.returncode, done.stdout, done.stderr) == (0, "returned True\n", "")


def test_private_directories_of_a_killed_process_are_removed_by_the_next_one(tmp_path):
    dead = tmp_path / f"det-k8s-{dead_pid()}-abcd"
    (dead / "chart").mkdir(parents=True)
    (dead / "chart" / "values.yaml").write_text("password: secret")
    alive = tmp_path / f"det-k8s-{os.getppid()}-efgh"
    alive.mkdir()
    other = tmp_path / "det-k8s-chart-1234"
    other.mkdir()
    made = stopping.private_dir("det-k8s-", tmp_path)
    try:
        assert not dead.exists() and alive.exists() and other.exists()
        assert made.name.startswith(f"det-k8s-{os.getpid()}-") and oct(made.stat().st_mode & 0o777) == "0o700"
    finally:
        stopping.remove_private(made)
    assert not made.exists()


def test_a_killed_processs_children_are_ended_by_the_next_one_never_a_stranger(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        time.sleep(0.2)
        stale = tmp_path / f"det-k8s-{dead_pid()}-wxyz"
        (stale / stopping.CHILDREN).mkdir(parents=True)
        (stale / stopping.CHILDREN / str(child.pid)).write_text(stopping._start_time(child.pid))
        (stale / stopping.CHILDREN / str(stranger.pid)).write_text("1")  # that id now belongs to someone else
        assert stopping.sweep_stale(tmp_path, "det-k8s-") == [stale]
        assert child.wait(10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for proc in (child, stranger):
            proc.kill()
            proc.wait()


class Backend:
    location = "s3://b/p/"

    def __init__(self, fail_delete: bool = False) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail_delete = fail_delete

    def url(self, key: str) -> str:
        return f"s3://b/{key}"

    def write(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def read(self, key: str) -> bytes:
        os.kill(os.getpid(), signal.SIGTERM)  # stopped right after the write
        time.sleep(5)
        return b""

    def list(self, prefix: str) -> list[str]:
        return list(self.objects)

    def delete(self, key: str) -> None:
        if self.fail_delete:
            raise OSError("connection reset")
        self.objects.pop(key, None)

    def explain(self, exc: Exception, step: Step) -> Failure:
        return Failure(Reason.OTHER, str(exc))


def test_a_probe_stopped_after_its_write_deletes_the_object_and_says_so(handlers):
    backend = Backend()
    with pytest.raises(stopping.Stopped):
        run_probe(backend, "p/det-k8s-probe-1", b"x", storage_type="s3")
    assert backend.objects == {}
    assert stopping.notes() == ("deleted the storage probe object s3://b/p/det-k8s-probe-1",)


def test_a_probe_that_cannot_delete_after_a_signal_names_the_object_and_the_command(handlers):
    backend = Backend(fail_delete=True)
    with pytest.raises(stopping.Stopped):
        run_probe(backend, "p/det-k8s-probe-1", b"x", storage_type="s3")
    assert stopping.notes() == ("the storage probe object s3://b/p/det-k8s-probe-1 may be left behind: "
                                "aws s3 rm s3://b/p/det-k8s-probe-1",)


@pytest.mark.parametrize(("url", "command"), [
    ("s3://b/k", "aws s3 rm s3://b/k"),
    ("gs://b/k", "gcloud storage rm gs://b/k"),
    ("https://acct.blob.core.windows.net/ckpt/dir/k", "az storage blob delete --container-name ckpt --name dir/k"),
    ("/mnt/ckpt/k", "rm /mnt/ckpt/k"),
])
def test_the_command_that_deletes_a_left_probe(url, command):
    assert left_behind(url).endswith(f": {command}")


def test_the_scheduler_deployment_gives_the_undo_time_before_sigkill():
    from det_k8s.chart.deploy import scheduler_manifests

    deployment = scheduler_manifests("img:1", "ml")[-1]
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > stopping.GRACE_SECONDS + 10  # the undo's grace, then a request's timeout, then the exit
    assert grace > stopping.GRACE_SECONDS + stopping.LAST_WORD_SECONDS  # a stuck process leaves on its own before


STUCK = '''
import os, subprocess, sys, time
from pathlib import Path
from det_k8s import stopping
stopping.install(exit_on_hang=sys.argv[1] == "real", grace=0.3, last_word=0.5)
private = stopping.private_dir()
(private / "values.yaml").write_text("password: Last-Word-Secret")
child = subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
stopping.child_started(child.pid)
deadline, told = time.monotonic() + float(sys.argv[2]), False
while time.monotonic() < deadline:  # a main thread every signal's exception is lost in, as a finalizer loses one
    try:
        if not told:
            told = True
            print(private, child.pid, flush=True)
        if sys.argv[3:] == ["fill-stderr"]:  # stuck writing to a stderr nobody reads
            sys.stderr.write("x" * 4096)
            sys.stderr.flush()
        else:
            time.sleep(0.01)
    except KeyboardInterrupt:
        pass
print("not stopped", flush=True)
'''


@contextlib.contextmanager
def stuck_process(*args: str, **popen: object) -> Iterator[subprocess.Popen[str]]:
    """STUCK started (and, whatever the test found, ended with the child it started)."""
    stuck = subprocess.Popen([sys.executable, "-c", STUCK, *args], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parents[2], **popen)  # type: ignore[call-overload]
    try:
        yield stuck
    finally:
        stuck.kill()
        stuck.wait()
        for record in Path(popen.get("env", {}).get("TMPDIR", "/nonexistent")).glob("det-k8s-*/children/*"):
            with contextlib.suppress(OSError):
                os.killpg(int(record.name), signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_process_stuck_past_the_grace_leaves_with_its_children_ended_and_no_secret_left(tmp_path, sig):
    """The last word (det_k8s/stopping.py): the first signal and the grace's second are both lost in the main
    thread, yet the process leaves, with the signal's exit code, one line, its child ended and its secret gone."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONFAULTHANDLER": "1"}
    with stuck_process("real", "20", env=env, stderr=subprocess.PIPE) as stuck:
        assert stuck.stdout is not None and stuck.stderr is not None
        private, child = stuck.stdout.readline().split()
        stuck.send_signal(sig)
        assert stuck.wait(20) == 128 + sig  # (the guard against a hang: it leaves 0.8 s after the signal)
        err = stuck.stderr.read()
        assert stuck.stdout.read() == ""
    assert f"det-k8s: still running 1 s after {stopping.name(sig)}: leaving now; " in err
    assert "Current thread" in err  # PYTHONFAULTHANDLER asked for where each thread was: a bug report's material
    assert not Path(private).exists()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "zombie" not in Path(f"/proc/{child}/status").read_text().lower():
        assert time.monotonic() < deadline, "the child outlived the process that started it"
        time.sleep(0.05)


def test_the_last_word_leaves_even_when_stderr_is_a_full_pipe_nobody_reads(tmp_path):
    """Its line cannot be written (the pipe is full): the process leaves all the same, a second later."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with stuck_process("real", "20", "fill-stderr", env=env, stderr=subprocess.PIPE) as stuck:
        assert stuck.stdout is not None
        stuck.stdout.readline()
        time.sleep(0.5)  # (stderr filled meanwhile)
        stuck.send_signal(signal.SIGTERM)
        assert stuck.wait(20) == 143  # (the guard against a hang: it leaves about 2 s after the signal)
    assert not list(tmp_path.glob("det-k8s-*"))


def test_only_the_real_process_leaves_on_its_own(tmp_path):
    """A caller sharing the process (the tests calling `main`) is never ended from under it: no last word."""
    with stuck_process("shared", "3", env={**os.environ, "TMPDIR": str(tmp_path)}) as stuck:
        assert stuck.stdout is not None
        stuck.stdout.readline()
        stuck.send_signal(signal.SIGTERM)  # (STUCK runs 3 s from its start: well past the grace and last word)
        assert stuck.wait(60) == 0 and stuck.stdout.read() == "not stopped\n"


def test_main_stops_on_a_signal_with_one_line_and_the_private_directory_gone(monkeypatch, tmp_path, capsys):
    """In-process: a command stopped by SIGTERM while its private chart directory holds a secret."""
    from det_k8s.cli import main

    seen: list[Path] = []
    original = stopping.private_dir

    def spy(prefix: str = "det-k8s-", parent: Path | None = None) -> Path:
        path = original(prefix, parent)
        (path / "values.yaml").write_text("password: Kill-Harness-Secret")
        seen.append(path)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return path

    monkeypatch.setattr(stopping, "private_dir", spy)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    before = signal.getsignal(signal.SIGTERM)  # (the test run's own: tests/conftest.py)
    code = main(["install", "demo", "-f", str(Path(__file__).parents[2] / "examples" / "gpu-cluster.yaml"),
                 "--dry-run", "--helm-binary", "/bin/true"])
    err = capsys.readouterr().err
    assert code == 143
    assert err.strip().splitlines()[-1] == "stopped by SIGTERM"
    assert seen and not seen[0].exists()
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are given back
