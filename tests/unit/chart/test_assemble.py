"""Writing the chart directory: complete, atomic, 0600 values, the user's chart never modified."""

from __future__ import annotations

import json
import stat
import tarfile
from pathlib import Path

import pytest
import yaml

from det_k8s.chart.assemble import MARKER, write_chart
from det_k8s.errors import InputError, UsageError
from det_k8s.settings import Document, load_settings


@pytest.fixture
def settings():
    return load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b, "
                                        "accessKey: AK, secretKey: SK}\n")])


def test_writes_a_complete_chart(tmp_path, settings):
    result = write_chart(tmp_path / "out", settings.values, "0.17.15")
    names = {p.name for p in result.directory.iterdir()}
    assert {"Chart.yaml", "values.yaml", "values.schema.json", "templates", MARKER} <= names
    assert (result.directory / "templates" / "master-deployment.yaml").exists()
    assert json.loads((result.directory / "values.schema.json").read_text())["required"] == ["maxSlotsPerPod"]


def test_values_file_is_private(tmp_path, settings):
    result = write_chart(tmp_path / "out", settings.values, "0.17.15")
    assert stat.S_IMODE(result.values_file.stat().st_mode) == 0o600
    assert "SK" in result.values_file.read_text()


def test_rerendering_replaces_a_previous_render(tmp_path, settings):
    out = tmp_path / "out"
    write_chart(out, settings.values, "0.17.14")
    (out / "templates" / "stale.yaml").write_text("kind: Stale\n")  # as if an older det-k8s had written it
    with (out / ".det-k8s").open("a") as marker:
        marker.write("templates/stale.yaml\n")
    write_chart(out, settings.values, "0.17.15")
    assert not (out / "templates" / "stale.yaml").exists()
    assert yaml.safe_load((out / "Chart.yaml").read_text())["appVersion"] == "0.17.15"


def test_rerendering_refuses_to_delete_files_the_user_added(tmp_path, settings):
    out = tmp_path / "out"
    write_chart(out, settings.values, "0.17.14")
    (out / "templates" / "mine.yaml").write_text("kind: Mine\n")
    (out / "NOTES.md").write_text("keep me")
    with pytest.raises(UsageError, match=r"did not write \(NOTES.md, templates/mine.yaml\)"):
        write_chart(out, settings.values, "0.17.15")
    assert (out / "NOTES.md").read_text() == "keep me"
    assert (out / "templates" / "mine.yaml").exists()
    assert yaml.safe_load((out / "Chart.yaml").read_text())["appVersion"] == "0.17.14"  # untouched
    (out / "NOTES.md").unlink()
    (out / "templates" / "mine.yaml").unlink()
    write_chart(out, settings.values, "0.17.15")  # only det-k8s's files left: replaced
    assert yaml.safe_load((out / "Chart.yaml").read_text())["appVersion"] == "0.17.15"


def test_refuses_a_non_empty_directory_it_did_not_write(tmp_path, settings):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        write_chart(out, settings.values, "0.17.15")
    assert (out / "notes.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no staging directory left behind


def test_a_failure_leaves_nothing_half_written(tmp_path, settings):
    with pytest.raises(InputError):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=tmp_path / "missing-chart")
    assert list(tmp_path.iterdir()) == []


def user_chart(root: Path) -> Path:
    chart = root / "official"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v1\nname: determined\nversion: 0.17.15\nappVersion: 0.17.15\n")
    (chart / "values.yaml").write_text("maxSlotsPerPod: 1\n")
    (chart / "templates" / "x.yaml").write_text("# {{ .Values.maxSlotsPerPod }}\n")
    return chart


def test_renders_into_a_copy_of_a_user_chart_without_touching_it(tmp_path, settings):
    chart = user_chart(tmp_path)
    before = {p: p.read_bytes() for p in chart.rglob("*") if p.is_file()}
    result = write_chart(tmp_path / "out", settings.values, "0.17.14", chart=chart)
    assert {p: p.read_bytes() for p in chart.rglob("*") if p.is_file()} == before
    assert (result.directory / "templates" / "x.yaml").exists()
    assert not (result.directory / "values.schema.json").exists()
    data = yaml.safe_load(result.chart_file.read_text())
    assert (data["apiVersion"], data["version"], data["appVersion"]) == ("v1", "0.17.15", "0.17.14")
    assert yaml.safe_load(result.values_file.read_text())["maxSlotsPerPod"] == 4


def test_accepts_a_packaged_chart(tmp_path, settings):
    chart = user_chart(tmp_path)
    archive = tmp_path / "determined-0.17.15.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(chart, arcname="determined")
    result = write_chart(tmp_path / "out", settings.values, "0.17.15", chart=archive)
    assert (result.directory / "templates" / "x.yaml").exists()


def test_a_directory_without_chart_yaml_is_not_a_chart(tmp_path, settings):
    (tmp_path / "nochart").mkdir()
    with pytest.raises(InputError, match="no Chart.yaml"):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=tmp_path / "nochart")


def test_an_unwritable_destination_is_one_line_naming_output(tmp_path, settings):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(InputError) as info:
        write_chart(blocker / "sub", settings.values, "0.17.15")
    assert str(info.value).startswith(f"--output-dir {blocker / 'sub'}: cannot write the chart there:")


def test_a_place_nobody_may_write_is_one_line_naming_output(settings):
    # /proc refuses new directories even to root, so this holds wherever the tests run
    with pytest.raises(InputError) as info:
        write_chart(Path("/proc/self/det-k8s-chart"), settings.values, "0.17.15")
    assert str(info.value).startswith("--output-dir /proc/self/det-k8s-chart: cannot write the chart there:")


def _archive_with(tmp_path, *members: tuple[tarfile.TarInfo, bytes | None]):
    import io

    archive = tmp_path / "evil.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        chart = tarfile.TarInfo("determined/Chart.yaml")
        body = b"apiVersion: v1\nname: determined\nversion: 0.17.15\n"
        chart.size = len(body)
        tar.addfile(chart, io.BytesIO(body))
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return archive


def _member(name: str, *, size: int = 0, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = size, kind, link
    return info


@pytest.mark.parametrize(("member", "data", "message"), [
    (_member("determined/../../escape.yaml", size=1), b"x", "points outside the chart directory"),
    (_member("/etc/cron.d/x", size=1), b"x", "points outside the chart directory"),
    (_member("determined/templates/link", kind=tarfile.SYMTYPE, link="/etc/shadow"), None, "is a link"),
    (_member("determined/templates/hard", kind=tarfile.LNKTYPE, link="determined/Chart.yaml"), None, "is a link"),
    (_member("determined/templates/fifo", kind=tarfile.FIFOTYPE), None, "is not a file or directory"),
    (_member("other/x.yaml", size=1), b"x", "expected one chart directory"),
])
def test_archive_entries_that_leave_the_chart_are_refused(tmp_path, settings, member, data, message):
    archive = _archive_with(tmp_path, (member, data))
    with pytest.raises(InputError, match=message):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=archive)
    assert not (tmp_path / "escape.yaml").exists() and not (tmp_path / "out").exists()


def test_a_gzip_bomb_is_refused_before_it_is_unpacked(tmp_path, settings):
    # like a 3 GiB file of zeros in a 3 MB archive: its header alone refuses it, nothing is decompressed
    import io

    class Zeros(io.RawIOBase):
        def __init__(self, size: int) -> None:
            self.left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[override]
            n = min(len(buffer), self.left)
            buffer[:n] = bytes(n)
            self.left -= n
            return n

    archive = tmp_path / "bomb.tgz"
    big = _member("determined/templates/zeros.yaml", size=64 * 2**20)
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.addfile(big, io.BufferedReader(Zeros(big.size)))
    with pytest.raises(InputError, match="is 64 MiB; helm refuses chart files over 5 MiB"):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=archive)


def test_many_files_and_a_large_total_are_refused(tmp_path, settings):
    from det_k8s.chart import assemble

    many = [(_member(f"determined/t/{i}.yaml", size=1), b"x") for i in range(assemble.MAX_CHART_FILES + 1)]
    with pytest.raises(InputError, match="more than 5000 entries"):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=_archive_with(tmp_path, *many))
    size = 4 * 2**20
    large = [(_member(f"determined/t/{i}.bin", size=size), bytes(size)) for i in range(26)]
    with pytest.raises(InputError, match="unpacks to more than 100 MiB"):
        write_chart(tmp_path / "out2", settings.values, "0.17.15", chart=_archive_with(tmp_path, *large))


def test_a_corrupt_archive_is_one_error(tmp_path, settings):
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(InputError, match="not a readable .tgz chart archive"):
        write_chart(tmp_path / "out", settings.values, "0.17.15", chart=bad)
