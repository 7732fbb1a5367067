"""Every validation rule, with good and bad input. Each problem names its key path."""

from __future__ import annotations

import textwrap

import pytest

from det_k8s.errors import SettingsError
from det_k8s.settings import Document, load_settings

BASE = "maxSlotsPerPod: 4\ncheckpointStorage:\n  type: s3\n  bucket: b\n"
# The chart's scheduler image as a real install names it: left unset, it is the placeholder nobody built, which is a
# warning of its own (tested below, with `problems(..., image=False)`).
IMAGE = "detK8sScheduler.image=registry.example.com/det-k8s:0.1.0"


def problems(text: str, *sets: str, image: bool = True) -> list[str]:
    loaded = load_settings([Document("s.yaml", textwrap.dedent(text))], (IMAGE, *sets) if image else sets)
    return [p.render() for p in loaded.problems]


def errors(text: str, *sets: str) -> list[str]:
    return [p for p in problems(text, *sets) if p.startswith("error")]


def warnings(text: str, *sets: str) -> list[str]:
    return [p for p in problems(text, *sets) if p.startswith("warning")]


def test_a_good_file_has_no_problems():
    assert problems(BASE) == []


# -- maxSlotsPerPod, slotType, slotResourceRequests.cpu


def test_max_slots_per_pod_is_required():
    assert errors("checkpointStorage: {type: s3, bucket: b}\n") == [
        "error: maxSlotsPerPod: required; set it to the GPUs per node (the greatest common divisor of the node sizes)"]


@pytest.mark.parametrize("value", ["0", "-2"])
def test_max_slots_per_pod_must_be_at_least_one(value):
    assert errors(BASE, f"maxSlotsPerPod={value}") == [
        f"error: maxSlotsPerPod: must be at least 1, found {value} (--set maxSlotsPerPod={value})"]


@pytest.mark.parametrize(("yaml_value", "found"), [('"4"', "a string"), ("4.5", "a number"), ("true", "a boolean"),
                                                    ("[4]", "a list")])
def test_max_slots_per_pod_must_be_an_integer(yaml_value, found):
    text = BASE.replace("maxSlotsPerPod: 4", f"maxSlotsPerPod: {yaml_value}")
    (only,) = errors(text)
    assert only.startswith(f"error: maxSlotsPerPod: expected an integer, found {found}")
    assert only.endswith("(s.yaml:1)")


def test_quoted_integer_gets_a_hint():
    assert "write it without quotes" in errors(BASE.replace("4", '"4"', 1))[0]


def test_slot_type_cuda_is_gpu_as_the_master_reads_it_and_others_are_refused():
    assert errors(BASE + "slotType: cuda\n") == []
    assert load_settings([Document("s.yaml", BASE + "slotType: cuda\n")]).settings().slot_type == "gpu"
    (only,) = errors(BASE + "slotType: GPU\n")
    assert only == "error: slotType: must be one of gpu, cuda, cpu, rocm; found 'GPU'; did you mean gpu? (s.yaml:5)"
    (only,) = errors(BASE + "appVersion: '0.26.2'\nslotType: rocm\n")
    assert only.startswith("error: slotType: Determined 0.26.2 has no rocm slot type (added in 0.36.0)")


def test_cpu_slots_need_slot_resource_requests_cpu():
    assert errors(BASE + "slotType: cpu\n") == [
        "error: slotResourceRequests.cpu: required when slotType is cpu; set the CPUs per slot, below a node's "
        "allocatable CPU (e.g. 7.5 for 8 cores)"]


@pytest.mark.parametrize("cpu", ["0", "0m"])
def test_cpu_per_slot_must_be_positive(cpu):
    text = BASE + f"slotType: cpu\nslotResourceRequests:\n  cpu: {cpu}\n"
    assert errors(text) == ["error: slotResourceRequests.cpu: must be greater than 0 when slotType is cpu (s.yaml:7)"]


@pytest.mark.parametrize("cpu", ["7.5", "7500m", "15", '"7910m"'])
def test_cpu_per_slot_accepts_numbers_and_quantities(cpu):
    assert errors(BASE + f"slotType: cpu\nslotResourceRequests:\n  cpu: {cpu}\n") == []


def test_cpu_per_slot_must_be_a_quantity():
    (only,) = errors(BASE + "slotType: cpu\nslotResourceRequests:\n  cpu: eight\n")
    assert only.startswith("error: slotResourceRequests.cpu: expected a number of CPUs such as 7.5 or 7500m")


def test_cpu_request_with_gpu_slots_is_a_warning():
    assert warnings(BASE + "slotResourceRequests:\n  cpu: 2\n") == [
        "warning: slotResourceRequests.cpu: ignored unless slotType is cpu (s.yaml:6)"]


# -- checkpointStorage


def test_storage_type_must_be_known():
    (only,) = errors("maxSlotsPerPod: 1\ncheckpointStorage:\n  type: nfs\n")
    assert only.startswith("error: checkpointStorage.type: must be one of shared_fs, s3, gcs, azure, directory, hdfs; "
                           "found 'nfs'")


def test_storage_types_exist_only_in_their_releases():
    hdfs = "maxSlotsPerPod: 1\ncheckpointStorage:\n  type: hdfs\n  hdfsUrl: hdfs://n:8020\n  hdfsPath: /c\n"
    (only,) = errors(hdfs)
    assert only == ("error: checkpointStorage.type: Determined 0.38.1 has no hdfs checkpoint storage (removed in "
                    "0.23.0); set appVersion below 0.23.0, or remove it (s.yaml:3)")
    assert errors(hdfs + "appVersion: '0.17.15'\n") == []
    directory = "maxSlotsPerPod: 1\ncheckpointStorage:\n  type: directory\n  containerPath: /c\n"
    assert errors(directory) == []
    (only,) = errors(directory + "appVersion: '0.26.2'\n")
    assert only.startswith("error: checkpointStorage.type: Determined 0.26.2 has no directory checkpoint storage "
                           "(added in 0.26.3); set appVersion to 0.26.3 or later, or remove it")


def test_a_gcs_prefix_before_0_18_2_is_the_issues_error():
    text = "maxSlotsPerPod: 1\nappVersion: '0.17.15'\ncheckpointStorage: {type: gcs, bucket: b, prefix: p}\n"
    assert errors(text) == ["error: checkpointStorage.prefix: Determined 0.17.15 has no prefix for gcs (added in "
                            "0.18.2); set appVersion to 0.18.2 or later, or remove it (s.yaml:3)"]
    assert errors(text.replace("gcs", "s3")) == []  # s3 has a prefix from 0.17.3
    (only,) = errors(text.replace("gcs", "s3").replace("0.17.15", "0.17.2"))
    assert "has no prefix for s3 (added in 0.17.3)" in only


@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_s3_and_gcs_need_a_bucket(kind):
    assert errors(f"maxSlotsPerPod: 1\ncheckpointStorage:\n  type: {kind}\n") == [
        f"error: checkpointStorage.bucket: required when checkpointStorage.type is {kind} (s.yaml:2)"]


def test_access_key_and_secret_key_come_together():
    (only,) = errors(BASE + "  accessKey: AKIA\n")
    assert only.startswith("error: checkpointStorage.secretKey: required when checkpointStorage.accessKey is set")
    (only,) = errors(BASE + "  secretKey: s\n")
    assert only.startswith("error: checkpointStorage.accessKey: required when checkpointStorage.secretKey is set")
    assert errors(BASE + "  accessKey: a\n  secretKey: s\n") == []


@pytest.mark.parametrize("url", ["minio:9000", "ftp://x", "http://", "just text"])
def test_endpoint_url_must_be_a_url(url):
    (only,) = errors(BASE + f"  endpointUrl: '{url}'\n")
    assert only.startswith(f"error: checkpointStorage.endpointUrl: must be an http(s) URL, found '{url}'")


def test_endpoint_url_accepts_http_and_https():
    assert errors(BASE + "  endpointUrl: http://minio.local:9000\n") == []
    assert errors(BASE + "  endpointUrl: https://s3.example.com\n") == []


def test_prefix_must_not_climb_out():
    (only,) = errors(BASE + "  prefix: a/../b\n")
    assert only.startswith("error: checkpointStorage.prefix: must not contain '..' path segments")


AZURE = "maxSlotsPerPod: 1\ncheckpointStorage:\n  type: azure\n  container: c\n"


def test_azure_needs_a_container():
    (only,) = errors("maxSlotsPerPod: 1\ncheckpointStorage:\n  type: azure\n  connection_string: x\n")
    assert only.startswith("error: checkpointStorage.container: required when checkpointStorage.type is azure")


def test_azure_needs_exactly_one_of_connection_string_or_account_url():
    (neither,) = errors(AZURE)
    assert neither.startswith("error: checkpointStorage.connection_string: exactly one of connection_string or "
                              "account_url must be set")
    (both,) = errors(AZURE + "  connection_string: x\n  account_url: https://a.blob.core.windows.net\n")
    assert "(both are set)" in both
    assert errors(AZURE + "  connection_string: x\n") == []
    assert errors(AZURE + "  account_url: https://a.blob.core.windows.net\n  credential: k\n") == []


def test_azure_credential_only_beside_account_url():
    (only,) = errors(AZURE + "  connection_string: x\n  credential: k\n")
    assert only.startswith("error: checkpointStorage.credential: only allowed together with account_url")


def test_azure_account_url_must_be_a_url():
    (only,) = errors(AZURE + "  account_url: myaccount\n")
    assert only.startswith("error: checkpointStorage.account_url: must be an http(s) URL")


def test_shared_fs_warns_that_it_is_for_testing():
    assert warnings("maxSlotsPerPod: 1\n") == [
        "warning: checkpointStorage.type: shared_fs is for testing only: most clusters' nodes share no file system; "
        "use s3, gcs or azure for real deployments"]


def test_shared_fs_needs_an_absolute_host_path():
    (only,) = errors("maxSlotsPerPod: 1\ncheckpointStorage:\n  hostPath: checkpoints\n")
    assert only.startswith("error: checkpointStorage.hostPath: must be an absolute path")
    (only,) = errors("maxSlotsPerPod: 1\ncheckpointStorage:\n  hostPath: null\n")
    assert only.startswith("error: checkpointStorage.hostPath: required when checkpointStorage.type is shared_fs")


def test_keys_of_another_storage_type_are_warned_about():
    assert warnings(BASE + "  container: c\n") == [
        "warning: checkpointStorage.container: ignored when checkpointStorage.type is s3 (s.yaml:5)"]


# -- networking, names, TLS


def test_tls_secret_requires_node_port():
    (only,) = errors(BASE + "tlsSecret: tls\n")
    assert only.startswith("error: tlsSecret: requires useNodePortForMaster: true")
    assert errors(BASE + "tlsSecret: tls\nuseNodePortForMaster: true\n") == []


@pytest.mark.parametrize("key", ["imagePullSecretName", "tlsSecret"])
def test_secret_names_must_be_kubernetes_names(key):
    text = BASE + f"{key}: My_Secret\nuseNodePortForMaster: true\n"
    (only,) = errors(text)
    assert only.startswith(f"error: {key}: 'My_Secret' is not a valid Kubernetes object name")


def test_master_port_must_be_a_port():
    assert errors(BASE, "masterPort=70000") == ["error: masterPort: must be at most 65535, found 70000 "
                                                "(--set masterPort=70000)"]


def test_enterprise_edition_without_pull_secret_warns():
    assert warnings(BASE + "enterpriseEdition: true\n")[0].startswith(
        "warning: imagePullSecretName: the enterprise edition image is private")


def test_external_db_ignores_bundled_db_settings():
    assert warnings(BASE + "db:\n  hostAddress: 10.0.0.1\n  storageSize: 10Gi\n") == [
        "warning: db.storageSize: ignored with an external database (db.hostAddress is set) (s.yaml:7)"]


@pytest.mark.parametrize("key", ["storageSize", "cpuRequest", "memRequest"])
def test_db_quantities_must_be_quantities(key):
    (only,) = errors(BASE + f"db:\n  {key}: lots\n")
    assert only.startswith(f"error: db.{key}: expected a Kubernetes quantity")


# -- defaultScheduler, task defaults, logging, version


@pytest.mark.parametrize("value", ["", "coscheduler", "preemption", " coscheduler ", "preemption  "])
def test_default_scheduler_accepts_empty_coscheduler_and_preemption_trimmed(value):
    assert errors(BASE + f'appVersion: "0.35.1"\ndefaultScheduler: "{value}"\n') == []
    settings = load_settings([Document("s.yaml", BASE + f'appVersion: "0.35.1"\ndefaultScheduler: "{value}"\n')])
    assert settings.settings().default_scheduler == value.strip()


def test_default_scheduler_rejects_others():
    (only,) = errors(BASE + "defaultScheduler: volcano\n")
    assert only.startswith('error: defaultScheduler: must be one of "" (empty), coscheduler, preemption; '
                           "found 'volcano'")


def test_preemption_scheduler_is_gone_in_036():
    (only,) = errors(BASE + "appVersion: 0.36.0\ndefaultScheduler: preemption\n")
    assert only.startswith("error: defaultScheduler: Determined 0.36.0 has no preemption scheduler (removed in "
                           "0.36.0); its master refuses to start with it")


def test_task_images_come_in_pairs_before_0_38():
    assert errors(BASE + "taskContainerDefaults:\n  cpuImage: a\n") == []  # v0.38.1 takes each on its own
    (only,) = errors(BASE + "appVersion: '0.26.2'\ntaskContainerDefaults:\n  cpuImage: a\n")
    assert only.startswith("error: taskContainerDefaults.gpuImage: required when cpuImage is set")
    assert errors(BASE + "taskContainerDefaults:\n  cpuImage: a\n  gpuImage: b\n") == []


@pytest.mark.parametrize("value", ["29400", "a:b", "2000:1000", "1:70000"])
def test_port_ranges_are_min_colon_max(value):
    (only,) = errors(BASE + f"appVersion: '0.17.15'\ntaskContainerDefaults:\n  ncclPortRange: '{value}'\n")
    assert only.startswith("error: taskContainerDefaults.ncclPortRange: expected MIN:MAX ports")


def test_pod_spec_must_be_a_pod():
    (only,) = errors(BASE + "taskContainerDefaults:\n  gpuPodSpec:\n    kind: Deployment\n")
    assert only.startswith("error: taskContainerDefaults.gpuPodSpec.kind: must be Pod")
    (only,) = errors(BASE + "taskContainerDefaults:\n  gpuPodSpec: [1]\n")
    assert only.startswith("error: taskContainerDefaults.gpuPodSpec: expected a mapping, found a list")


def test_pod_spec_init_containers_are_not_supported():
    text = BASE + "taskContainerDefaults:\n  gpuPodSpec:\n    spec:\n      initContainers: [{name: x}]\n"
    assert warnings(text)[0].startswith("warning: taskContainerDefaults.gpuPodSpec.spec.initContainers")


def test_elastic_logging_needs_host_and_port():
    assert [e.split(";")[0] for e in errors(BASE + "logging:\n  type: elastic\n")] == [
        "error: logging.host: required when logging.type is elastic (s.yaml:5)",
        "error: logging.port: required when logging.type is elastic (s.yaml:5)"]


@pytest.mark.parametrize(("version", "says"), [
    ("0.18.0-rc1", "'0.18.0-rc1' is not a Determined release number"),
    ("0.18.0.dev0", "'0.18.0.dev0' is a development build, whose image cannot be pulled"),
    ("4d5c3f2", "'4d5c3f2' is a commit, whose configuration det-k8s cannot know"),
    ("0.16.4", "Determined 0.16.4 is not supported: det-k8s supports Determined 0.17.0 to 0.38.x"),
    ("0.39.0", "Determined 0.39.0 is not supported"),
])
def test_app_version_must_name_a_supported_release(version, says):
    (only,) = errors(BASE + f"appVersion: '{version}'\n")
    assert only.startswith(f"error: appVersion: {says}"), only


@pytest.mark.parametrize(("version", "tag"), [("v0.38.1", "0.38.1"), ("0.26.2 ", "0.26.2"), (" 0.17.15", "0.17.15")])
def test_app_version_is_the_image_tag_exactly(version, tag):
    # Chart.yaml's appVersion is the master image's tag (determinedai/determined-master:<appVersion>): the images are
    # tagged 0.38.1, not like the git tag v0.38.1, and helm's semverCompare refuses a version with spaces.
    (only,) = errors(BASE + f"appVersion: '{version}'\n")
    assert only.startswith(f"error: appVersion: {version!r} is not an image tag of Determined's; use {tag!r}"), only


def test_keys_of_other_releases_are_errors_naming_the_release_that_has_them():
    (only,) = errors(BASE + "appVersion: '0.34.2'\nresourceManager:\n  defaultNamespace: ml\n")
    assert only == ("error: resourceManager.defaultNamespace: Determined 0.34.2 has no resourceManager.defaultNamespace "
                    "(added in 0.35.0); set appVersion to 0.35.0 or later, or remove it (s.yaml:7)")
    (only,) = errors(BASE + "appVersion: '0.17.15'\ninitialUserPassword: Abcdefg1\n")
    assert "has no initialUserPassword (added in 0.31.0)" in only
    (only,) = errors(BASE + "taskContainerDefaults:\n  ncclPortRange: '1:2'\n")
    assert "Determined 0.38.1 has no ncclPortRange or glooPortRange (removed in 0.26.2)" in only


def test_official_keys_the_chart_ignores_are_accepted_with_a_warning():
    assert errors(BASE + "oidc: {enabled: true}\ndb:\n  claimSuffix: x\n") == []
    found = warnings(BASE + "oidc: {enabled: true}\n")
    assert any(w.startswith("warning: oidc: has no effect with det-k8s's chart") for w in found), found


@pytest.mark.parametrize(("password", "broken"), [("short1A", "at least 8 characters"), ("alllower1", "an uppercase"),
                                                  ("ALLUPPER1", "a lowercase"), ("NoDigitsHere", "a number")])
def test_the_initial_password_follows_the_official_charts_rules(password, broken):
    (only,) = errors(BASE + f"initialUserPassword: {password}\n")
    assert only.startswith("error: initialUserPassword: must have") and broken in only


def test_app_version_must_be_a_string():
    (only,) = errors(BASE + "appVersion: 0.17\n")
    assert only.startswith('error: appVersion: expected a string, found a number; quote it: "0.17"')


# -- unknown keys, suggestions, wrong places


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("maxSlotPerPod: 4\n", "error: maxSlotPerPod: unknown key; did you mean maxSlotsPerPod? (s.yaml:5)"),
        ("checkpointStorage:\n  connectionString: x\n", "did you mean checkpointStorage.connection_string?"),
        ("bucket: x\n", "error: bucket: unknown key; did you mean checkpointStorage.bucket? (s.yaml:5)"),
        ("db:\n  pasword: x\n", "did you mean db.password?"),
        ("completelyDifferent: 1\n", "error: completelyDifferent: unknown key (s.yaml:5)"),
    ],
)
def test_unknown_keys_are_errors_with_a_suggestion(text, expected):
    found = errors(BASE + text)
    assert any(expected in e for e in found), found


def test_all_problems_are_reported_at_once():
    text = "maxSlotPerPod: 4\ncheckpointStorage:\n  type: s3\nslotType: gpus\ntlsSecret: t\n"
    assert len(errors(text)) == 5  # unknown key, slotType, maxSlotsPerPod required, bucket, tls


def test_later_files_override_earlier_ones():
    loaded = load_settings([Document("a.yaml", BASE), Document("b.yaml", "maxSlotsPerPod: 8\n")])
    assert loaded.values["maxSlotsPerPod"] == 8
    assert str(loaded.sources.find(("maxSlotsPerPod",))) == "b.yaml:1"


def test_set_overrides_files_and_set_string_keeps_strings():
    loaded = load_settings([Document("a.yaml", BASE)], ["maxSlotsPerPod=2"], ["clusterName=007"])
    assert loaded.values["maxSlotsPerPod"] == 2
    assert loaded.values["clusterName"] == "007"


def test_null_restores_nothing_but_removes_the_default():
    loaded = load_settings([Document("a.yaml", BASE + "masterMemRequest: null\n")])
    assert "masterMemRequest" not in loaded.values


def test_defaults_fill_unset_keys():
    loaded = load_settings([Document("a.yaml", BASE)])
    assert loaded.values["db"]["storageSize"] == "30Gi"
    assert loaded.values["imageRegistry"] == "determinedai"
    assert loaded.app_version == "0.38.1"  # the newest release
    assert loaded.values["defaultImages"]["cpuImage"] == "determinedai/pytorch-ngc:0.38.1"
    old = load_settings([Document("a.yaml", BASE + "appVersion: '0.17.15'\n")])
    assert "defaultImages" not in old.values and "logLevel" not in old.values  # not keys of 0.17.15
    assert "appVersion" not in loaded.values


def test_settings_raises_with_every_error():
    loaded = load_settings([Document("a.yaml", "slotType: x\n")])
    with pytest.raises(SettingsError) as info:
        loaded.settings()
    assert len(info.value.problems) == 2
    assert info.value.exit_code == 1


def test_typed_settings_hide_secrets_from_repr():
    loaded = load_settings([Document("a.yaml", BASE + "  accessKey: AKIAEXAMPLE\n  secretKey: TOPSECRET\n"
                                                       "db:\n  password: hunter2\n")])
    settings = loaded.settings()
    assert settings.checkpoint.secret_key == "TOPSECRET"
    for text in (repr(settings), repr(settings.checkpoint)):
        assert "TOPSECRET" not in text and "hunter2" not in text and "AKIAEXAMPLE" not in text


@pytest.mark.parametrize("key", ["name", "user", "password"])
def test_database_name_user_and_password_cannot_be_unset(key):
    (only,) = errors(BASE + f"db:\n  {key}: null\n")
    assert only.startswith(f"error: db.{key}: required")


def test_set_with_list_indexes_names_its_argument_for_every_key_on_the_way():
    assert errors(BASE, "a.b[0]=x") == ["error: a: unknown key (--set a.b[0]=x)"]
    assert errors(BASE, "maxSlotsPerPod[0]=4") == [
        "error: maxSlotsPerPod: expected an integer, found a list (--set maxSlotsPerPod[0]=4)"]


def test_a_list_where_a_choice_belongs_is_named_not_printed():
    (only,) = errors(BASE, "checkpointStorage.type[1]=s3")
    assert only.startswith("error: checkpointStorage.type: must be one of shared_fs, s3, gcs, azure, directory, hdfs; "
                           "found a list")


@pytest.mark.parametrize("url", ["http://u:p@[::1:1", "http://[::1]:99999", "https://x:port"])
def test_malformed_urls_are_problems_not_crashes(url):
    (only,) = errors(BASE + f"  endpointUrl: '{url}'\n")
    assert only.startswith("error: checkpointStorage.endpointUrl: must be an http(s) URL")
    assert "p@" not in only


def test_endpoint_url_must_not_carry_credentials():
    (only,) = errors(BASE + "  endpointUrl: 'http://minio:PASS@minio:9000'\n")
    assert only.startswith("error: checkpointStorage.endpointUrl: must not carry credentials")
    assert "PASS" not in only


def test_account_url_must_not_carry_a_sas_token():
    (only,) = errors(AZURE + "  account_url: 'https://a.blob.core.windows.net/?sv=1&sig=SIGSECRET'\n")
    assert only.startswith("error: checkpointStorage.account_url: must not carry a SAS token")
    assert "SIGSECRET" not in only


@pytest.mark.parametrize(("version", "tag", "key"), [
    ("0.17.0", "0.17.15", "taskContainerDefaults"), ("0.21.0", "0.17.15", "taskContainerDefaults"),
    ("0.30.0", "0.26.2", "defaultImages"), ("0.38.0", "0.38.1", "defaultImages"),
])
def test_default_task_images_between_the_tags_read_are_named_as_the_nearest_tags(version, tag, key):
    # Each release's chart names its own default images; det-k8s knows those of 0.17.15, 0.26.2 and 0.38.1 and
    # silently gave every release between them the nearest tag's.
    (only,) = warnings(BASE, f"appVersion={version}")
    assert only.startswith(f"warning: {key}: the default task images of Determined {version} are not known to "
                           f"det-k8s (it read the official charts of 0.17.15, 0.26.2 and 0.38.1): its master is given "
                           f"{tag}'s (cpu: ")
    assert f"; set {key}.cpuImage and gpuImage to the images your release's chart names" in only


@pytest.mark.parametrize("version", ["0.17.15", "0.26.2", "0.38.1"])
def test_default_task_images_of_the_tags_read_or_set_by_the_user_are_no_warning(version):
    assert warnings(BASE, f"appVersion={version}") == []
    assert warnings(BASE, "appVersion=0.30.0", "defaultImages.cpuImage=m/cpu:1", "defaultImages.gpuImage=m/gpu:1") == []
    assert warnings(BASE, "appVersion=0.21.0", "taskContainerDefaults.cpuImage=m/cpu:1",
                    "taskContainerDefaults.gpuImage=m/gpu:1") == []


@pytest.mark.parametrize(("kind", "bucket", "name", "prefix"), [
    ("gcs", "gs://det-ckpt", "det-ckpt", None), ("s3", "s3://det-ckpt/team-a/", "det-ckpt", "team-a/"),
    ("s3", "det-ckpt/team-a", "det-ckpt", "team-a"), ("gcs", "https://storage.googleapis.com/b", None, None)])
def test_a_bucket_given_as_a_url_or_path_names_the_bucket_and_the_prefix(kind, bucket, name, prefix):
    # The master hands `bucket` to the cloud SDK as a bucket name: 'gs://det-ckpt' validated and every checkpoint of
    # every trial then failed. Bucket names hold no '/' in S3 or GCS.
    (only,) = errors(BASE.replace("type: s3", f"type: {kind}").replace("bucket: b", f"bucket: '{bucket}'"))
    assert only.startswith(f"error: checkpointStorage.bucket: must be the bucket's name, found {bucket!r}"), only
    if name:
        assert f"set bucket: {name}" in only and (f"and prefix: {prefix}" in only) == bool(prefix), only


def test_a_038_task_container_default_on_an_older_release_reads_as_english():
    (only,) = errors(BASE + "appVersion: '0.26.2'\ntaskContainerDefaults:\n  startupHook: echo\n")
    assert only.startswith("error: taskContainerDefaults.startupHook: Determined 0.26.2 has no startupHook, "
                           "checkpointGcPodSpec or logPolicies (added in 0.38.0)"), only


def test_tls_in_the_master_behind_an_openshift_route_needs_no_node_port():
    # The Route reaches the master's Service whatever its type (ClusterIP from 0.26.x's chart on), TLS passed through:
    # useNodePortForMaster (for an Ingress, the documents say) is meaningless there and was required.
    route = BASE + "tlsSecret: det-tls\nopenshiftRoute:\n  enabled: true\n  termination: passthrough\n"
    assert errors(route) == []
    (only,) = errors(BASE + "tlsSecret: det-tls\n")
    assert only.startswith("error: tlsSecret: requires useNodePortForMaster: true")


def test_a_set_of_a_key_that_names_a_secret_shows_its_value():
    # tlsSecret names a Secret and holds none: `--set tlsSecret=det-tls` was shown as tlsSecret=***.
    (only,) = errors(BASE, "tlsSecret=det-tls")
    assert only.endswith("(--set tlsSecret=det-tls)"), only


def test_a_pool_namespace_the_master_ignores_is_a_warning():
    # From 0.35.0 the master ignores resource_pools[].kubernetes_namespace (workspace-namespace bindings replace it),
    # though v0.38.1's own values.yaml still shows it: a pool's tasks land in the default namespace, silently.
    pools = BASE + "resourcePools:\n  - pool_name: a\n    kubernetes_namespace: team-a\n"
    assert errors(pools) == []
    found = [w for w in warnings(pools) if "kubernetes_namespace" in w]
    assert found == ["warning: resourcePools[0].kubernetes_namespace: Determined 0.38.1 ignores it (removed in "
                     "0.35.0): the pool's tasks run in the default namespace; bind a workspace to namespace team-a "
                     "instead, or remove it (s.yaml:7)"], found
    assert [w for w in warnings(pools, "appVersion=0.34.2") if "kubernetes_namespace" in w] == []


@pytest.mark.parametrize(("registry", "image"), [
    ("reg.local/det/", "reg.local/det//determined-master:0.38.1"),
    ("https://reg.local/det", "https://reg.local/det/determined-master:0.38.1"),
    ("reg.local/Det", "reg.local/Det/determined-master:0.38.1")])
def test_an_image_registry_that_makes_no_valid_image_reference_is_an_error(registry, image):
    # The master image is <imageRegistry>/determined-master:<appVersion>: a trailing '/', a scheme or an upper-case
    # repository path made a reference the kubelet refuses (InvalidImageName), and validate said the settings were fine.
    (only,) = errors(BASE + f"imageRegistry: '{registry}'\n")
    assert only.startswith(f"error: imageRegistry: makes the master image {image!r}, not a valid image reference "
                           "(the kubelet refuses it: InvalidImageName)"), only
    assert errors(BASE + "imageRegistry: 'reg.local:5000/det'\n") == []


def test_a_task_image_that_is_no_image_reference_is_an_error():
    (only,) = errors(BASE + "defaultImages:\n  cpuImage: 'my image:1'\n")
    assert only.startswith("error: defaultImages.cpuImage: 'my image:1' is not a valid image reference"), only
    assert errors(BASE + "defaultImages:\n  cpuImage: 'reg.local:5000/env/cpu:1.2@sha256:" + "a" * 64 + "'\n") == []


@pytest.mark.parametrize(("host", "says"), [
    ("pg.example.com:5433", "holds a port; set db.hostAddress: pg.example.com and db.port: 5433"),
    ("postgres://det:pw@pg:5432/det", "must be the database's host name or address, not a URL"),
])
def test_a_database_host_with_a_port_or_a_url_is_an_error(host, says):
    # The master joins db.host and db.port into its connection: 'pg:5433' made 'pg:5433:5432' and it never started.
    (only,) = errors(BASE + f"db:\n  hostAddress: '{host}'\n")
    assert only.startswith("error: db.hostAddress: ") and says in only and "pw" not in only, only
    assert errors(BASE + "db:\n  hostAddress: 'fd00::5'\n") == errors(BASE + "db:\n  hostAddress: pg.local\n") == []


def test_an_edge_route_in_front_of_a_master_serving_tls_is_an_error():
    # With tlsSecret the master serves TLS only; an edge Route ends TLS at the router and sends it plain HTTP.
    text = BASE + "tlsSecret: det-tls\nopenshiftRoute:\n  enabled: true\n  termination: edge\n"
    (only,) = errors(text)
    assert only.startswith("error: openshiftRoute.termination: edge sends the master plain HTTP, and with tlsSecret "
                           "it serves only TLS; use passthrough or reencrypt"), only
    assert errors(text.replace("edge", "reencrypt")) == []


# -- the scheduler the bundled chart deploys (gangScheduler: det-k8s, detK8sScheduler)


def values(text: str, *sets: str, bundled_chart: bool = True) -> dict:
    return load_settings([Document("s.yaml", textwrap.dedent(text))], (IMAGE, *sets),
                         bundled_chart=bundled_chart).values


def test_where_the_chart_deploys_det_k8s_scheduler_the_master_pods_name_it_by_default():
    assert values(BASE)["defaultScheduler"] == "coscheduler"
    assert values(BASE, "gangScheduler=det-k8s", "detK8sScheduler.enabled=true")["defaultScheduler"] == "coscheduler"
    assert values(BASE + "defaultScheduler: preemption\n", "appVersion=0.35.0")["defaultScheduler"] == "preemption"
    assert problems(BASE) == []


@pytest.mark.parametrize("sets", [("gangScheduler=plugin",), ("detK8sScheduler.enabled=false",)])
def test_without_det_k8s_scheduler_in_the_chart_default_scheduler_stays_unset(sets):
    assert "defaultScheduler" not in values(BASE, *sets)
    assert not [p for p in problems(BASE, *sets, image=False) if p.startswith(("warning: detK8sScheduler",
                                                                                "warning: defaultScheduler"))]


def test_settings_not_for_the_bundled_chart_get_no_default_scheduler():
    """A user's --chart (the official chart deploys its own kube-scheduler for coscheduler) or a master's
    configuration read back (its default_scheduler is what it is)."""
    assert "defaultScheduler" not in values(BASE, bundled_chart=False)
    loaded = load_settings([Document("s.yaml", BASE)], bundled_chart=False)
    assert [p.render() for p in loaded.problems] == []


def test_an_empty_default_scheduler_beside_the_deployed_scheduler_is_explained():
    (only,) = warnings(BASE + 'defaultScheduler: ""\n')
    assert only.startswith("warning: defaultScheduler: is empty, so the master gives its task pods the default "
                           "Kubernetes scheduler, which places them one pod at a time, and the det-k8s scheduler this "
                           "chart deploys (gangScheduler: det-k8s) binds none of them"), only
    assert "remove defaultScheduler (unset, it is coscheduler" in only and "detK8sScheduler.enabled: false" in only
    assert values(BASE + 'defaultScheduler: ""\n')["defaultScheduler"] == ""
    assert warnings(BASE + 'defaultScheduler: ""\n', "detK8sScheduler.enabled=false") == []


def test_the_placeholder_scheduler_image_is_said_plainly_with_how_to_provide_one():
    (only,) = problems(BASE, image=False)
    assert only == (
        "warning: detK8sScheduler.image: unset: the chart's scheduler would run det-k8s:0.1.0, a placeholder no "
        "registry serves; its pods would wait in ImagePullBackOff and the master's task pods (schedulerName "
        "coscheduler) would stay Pending; build the image (scripts/image in det-k8s's checkout, or docker build -f "
        "deploy/Dockerfile), push it where the nodes pull from and set detK8sScheduler.image to it; or set "
        "detK8sScheduler.enabled: false and run `det-k8s scheduler run` yourself")
    assert problems(BASE, "detK8sScheduler.image=det-k8s:0.1.0", image=False) == []  # built and loaded by hand
