"""Choosing the cluster like kubectl and helm: kubeconfig files, contexts and namespaces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from det_k8s.errors import InputError, UsageError
from det_k8s.kube.config import kubeconfig_paths, resolve


def write(path: Path, current: str = "a") -> Path:
    path.write_text(yaml.safe_dump({
        "current-context": current,
        "contexts": [{"name": "a", "context": {"cluster": "c1", "namespace": "team-a"}},
                     {"name": "b", "context": {"cluster": "c2"}}],
        "clusters": [{"name": "c1", "cluster": {"server": "https://a:6443"}},
                     {"name": "c2", "cluster": {"server": "https://b:6443"}}],
    }))
    return path


def test_explicit_kubeconfig_wins_over_the_environment(tmp_path):
    assert kubeconfig_paths("/x/kc", {"KUBECONFIG": "/y"}) == [Path("/x/kc")]
    assert kubeconfig_paths(None, {"KUBECONFIG": "/y:/z", "HOME": "/h"}) == [Path("/y"), Path("/z")]
    assert kubeconfig_paths(None, {"HOME": "/h"}) == [Path("/h/.kube/config")]


def test_first_existing_file_of_a_list_is_used(tmp_path):
    kc = write(tmp_path / "kc")
    target, _ = resolve(None, None, None, {"KUBECONFIG": f"{tmp_path / 'missing'}:{kc}"})
    assert (target.kubeconfig, target.context, target.server) == (kc, "a", "https://a:6443")


@pytest.mark.parametrize(
    ("namespace", "env", "context", "expected"),
    [("flag", {"HELM_NAMESPACE": "env"}, None, "flag"), (None, {"HELM_NAMESPACE": "env"}, None, "env"),
     (None, {}, None, "team-a"), (None, {}, "b", "default")],
)
def test_namespace_follows_helm(tmp_path, namespace, env, context, expected):
    kc = write(tmp_path / "kc")
    target, _ = resolve(str(kc), context, namespace, env)
    assert target.namespace == expected


def test_helm_kubecontext_is_honoured(tmp_path):
    kc = write(tmp_path / "kc")
    assert resolve(str(kc), None, None, {"HELM_KUBECONTEXT": "b"})[0].context == "b"


def test_unknown_context_lists_the_known_ones(tmp_path):
    kc = write(tmp_path / "kc")
    with pytest.raises(UsageError) as info:
        resolve(str(kc), "prod", None, {})
    assert str(info.value) == f"--kube-context prod: no such context in {kc} (contexts: a, b)"


def test_missing_kubeconfig_says_how_to_fix_it(tmp_path):
    with pytest.raises(InputError) as info:
        resolve(str(tmp_path / "none"), None, None, {})
    assert "no kubeconfig found" in str(info.value) and "--kubeconfig" in (info.value.hint or "")


def test_files_in_kubeconfig_are_merged_like_kubectl(tmp_path):
    first = tmp_path / "a"
    first.write_text(yaml.safe_dump({"contexts": [{"name": "a", "context": {"cluster": "c1"}}],
                                     "clusters": [{"name": "c1", "cluster": {"server": "https://first:6443"}}]}))
    second = write(tmp_path / "kc", current="b")
    target, data = resolve(None, None, None, {"KUBECONFIG": f"{first}:{second}"})
    assert target.context == "b"  # the first file names no current-context; the second does
    assert target.server == "https://b:6443"
    assert resolve(None, "a", None, {"KUBECONFIG": f"{first}:{second}"})[0].server == "https://first:6443"  # first wins
    assert sorted(c["name"] for c in data["contexts"]) == ["a", "b"]


def test_relative_certificate_paths_are_resolved_against_their_file(tmp_path):
    (tmp_path / "certs").mkdir()
    kc = tmp_path / "certs" / "kc"
    kc.write_text(yaml.safe_dump({
        "current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://x", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"client-certificate": "/abs/u.crt", "client-key": "u.key"}}]}))
    _, data = resolve(str(kc), None, None, {})
    assert data["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "certs" / "ca.crt")
    assert data["users"][0]["user"]["client-certificate"] == "/abs/u.crt"
    assert data["users"][0]["user"]["client-key"] == str(tmp_path / "certs" / "u.key")


def test_an_unknown_context_across_several_files_names_them_all(tmp_path):
    kc = write(tmp_path / "kc")
    with pytest.raises(UsageError) as info:
        resolve(None, "prod", None, {"KUBECONFIG": f"{tmp_path / 'none'}:{kc}"})
    assert "no such context in your kubeconfig files (contexts: a, b)" in str(info.value)


@pytest.mark.parametrize(("namespace", "env", "source"), [
    ("../x", {}, "--namespace"), ("ok\n", {}, "--namespace"), (None, {"HELM_NAMESPACE": "../../x"}, "HELM_NAMESPACE"),
    (None, {"HELM_NAMESPACE": "UPPER"}, "HELM_NAMESPACE"),
])
def test_a_namespace_is_a_whole_dns_label_wherever_it_comes_from(tmp_path, namespace, env, source):
    kc = write(tmp_path / "kc")
    with pytest.raises(UsageError) as info:
        resolve(str(kc), None, namespace, env)
    assert info.value.message.startswith(f"{source} ") and "not a valid namespace name" in info.value.message


def test_a_kubeconfig_namespace_is_checked_and_named(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({"current-context": "a", "contexts": [{"name": "a", "context": {"namespace": "a/b"}}]}))
    with pytest.raises(UsageError, match=rf"^the namespace of context a in {kc} 'a/b': not a valid namespace"):
        resolve(str(kc), None, None, {})


def test_server_credentials_are_masked_and_registered(tmp_path):
    from det_k8s.scrub_output import scrub

    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({
        "current-context": "a", "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://admin:PLANTED-SRV-91%21@api:6443"}}],
        "users": [{"name": "u", "user": {"token": "PLANTED-TOKEN-2231"}}]}))
    target, _ = resolve(str(kc), None, None, {})
    assert target.server == "https://***@api:6443"
    assert scrub("token PLANTED-TOKEN-2231, password PLANTED-SRV-91!") == "token ***, password ***"


@pytest.mark.parametrize("text", ["a: [", "[" * 500 + "]" * 500, "- just\n- a list\n"])
def test_a_broken_kubeconfig_is_one_error(tmp_path, text):
    kc = tmp_path / "kc"
    kc.write_text(text)
    with pytest.raises(InputError):
        resolve(str(kc), None, None, {})


def test_a_kubeconfig_that_is_a_fifo_is_refused_at_once(tmp_path):
    import os

    fifo = tmp_path / "kc"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a named pipe, not a regular file"):
        resolve(str(fifo), None, None, {})
