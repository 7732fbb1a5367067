"""One place maps failures to messages and exit codes: never a traceback unless --debug asks."""

from __future__ import annotations

import pytest
import typer

from det_k8s.cli import run_guarded
from det_k8s.errors import ConsentRequired, DetK8sError, Problem, SettingsError, Severity


def raising(exc: BaseException):
    def invoke():
        raise exc

    return invoke


def test_a_bug_is_one_line_and_exit_1(capsys):
    assert run_guarded(raising(RuntimeError("boom"))) == 1
    err = capsys.readouterr().err
    assert err.strip() == "error: internal error: RuntimeError: boom; run again with --debug for the traceback"
    assert "Traceback" not in err


def test_debug_shows_the_traceback_of_a_bug():
    with pytest.raises(RuntimeError):
        run_guarded(raising(RuntimeError("boom")), debug=True)


def test_det_k8s_errors_print_message_and_hint_with_their_exit_code(capsys):
    assert run_guarded(raising(DetK8sError("it failed", hint="try this"))) == 1
    assert capsys.readouterr().err.strip() == "error: it failed; try this"
    assert run_guarded(raising(ConsentRequired("needs --yes"))) == 2


def test_settings_errors_print_every_problem(capsys):
    problems = [Problem(Severity.ERROR, "a", "bad"), Problem(Severity.ERROR, "b", "worse")]
    assert run_guarded(raising(SettingsError(problems))) == 1
    assert capsys.readouterr().err.splitlines() == ["error: a: bad", "error: b: worse"]


def test_ctrl_c_is_130(capsys):
    assert run_guarded(raising(KeyboardInterrupt())) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_an_abort_from_ctrl_c_in_a_prompt_is_130(capsys):
    def invoke():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise typer.Abort() from exc

    assert run_guarded(invoke) == 130


def test_a_plain_abort_is_1(capsys):
    assert run_guarded(raising(typer.Abort())) == 1
    assert capsys.readouterr().err.strip() == "aborted"


def test_return_codes_pass_through():
    assert run_guarded(lambda: 3) == 3
    assert run_guarded(lambda: None) == 0
