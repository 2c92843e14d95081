"""deploy/kubernetes and deploy/prometheus/scrape-config.yml agree with each other and with what
`npuwatch serve` really does: the DaemonSet's command is one `serve` accepts, its probes ask paths
the server answers (and keep answering while a chip is in Alarm), the Service and ServiceMonitor
select its pods and port, every device node and driver path is mounted read-only, and the scrape
config passes promtool and names each node on a real Prometheus."""

from __future__ import annotations

import json
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import psutil
import pytest
import yaml

from npuwatch.cli import build_parser
from npuwatch.exporter.command import DEFAULT_PORT, parse_listen
from tests.conftest import REPO, need
from tests.fleet.cluster import PrometheusServer, need_prometheus, stop_process

KUBE = REPO / "deploy" / "kubernetes"
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
SCRAPE_CONFIG = PROMETHEUS_DIR / "scrape-config.yml"
RULES = PROMETHEUS_DIR / "npuwatch-rules.yml"
NAMESPACE = "npuwatch"
#: The label Huawei's MindCluster puts on NPU nodes (its device plugin's and npu-exporter's
#: nodeSelector), and the value README tells users to add.
NODE_LABEL = "accelerator"
NODE_LABEL_VALUE = "huawei-Ascend910"
#: What a container needs from the host to read the chips (README "Docker"; the doctor's mount
#: hints; Huawei's docker runtime): the chips' /dev/davinciN come from `privileged`, since their
#: number varies by node and a hostPath cannot name them all.
DEVICE_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
DRIVER_PATHS = (
    "/usr/local/Ascend/driver",
    "/usr/local/Ascend/firmware",
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/etc/ascend_install.info",
)
#: hostPath types that create the path on the host when it is missing: a write to the node.
CREATING_TYPES = {"DirectoryOrCreate", "FileOrCreate", ""}
Manifest = Dict[str, Any]


# ---------------------------------------------------------------- helpers


def manifests() -> Dict[str, Manifest]:
    """Every object the kustomization lists, by kind (one object of each kind here)."""
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))
    found: Dict[str, Manifest] = {}
    for name in kustomization["resources"]:
        for document in yaml.safe_load_all((KUBE / name).read_text(encoding="utf-8")):
            assert document["kind"] not in found, f"two {document['kind']} objects"
            found[document["kind"]] = document
    return found


def pod_spec() -> Manifest:
    spec: Manifest = manifests()["DaemonSet"]["spec"]["template"]["spec"]
    return spec


def container() -> Manifest:
    (only,) = pod_spec()["containers"]
    return dict(only)


def container_port() -> Manifest:
    (port,) = container()["ports"]
    return dict(port)


def http_get(url: str) -> Tuple[int, str]:
    """Status and body; an HTTP error status is an answer too."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def loopback(argv: Sequence[str]) -> List[str]:
    """``argv`` with its ``--listen`` turned into a free loopback port (port 0)."""
    words = list(argv)
    at = words.index("--listen")
    words[at + 1] = "127.0.0.1:0"
    return words


@contextmanager
def serve_demo(argv: Sequence[str], scenario: str) -> Iterator[str]:
    """Run ``npuwatch <argv> --demo SCENARIO`` (its --listen moved to loopback) until the block
    ends; yield its base URL.  Afterwards nothing it started is left running."""
    command = [sys.executable, "-m", "npuwatch", *loopback(argv), "--demo", scenario]
    # stderr to a file, not a pipe nobody reads: a chatty child never blocks on it.
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        started: List[psutil.Process] = []
        try:
            line = _first_line(process, deadline_s=60)
            match = re.search(r"listening on (http://\S+?) ", line)
            assert match, f"no start-up line from {command}: {line!r}"
            started = psutil.Process(process.pid).children(recursive=True)
            yield match.group(1)
        finally:
            started += [p for p in _children(process.pid) if p not in started]
            stop_process(process)
            _, alive = psutil.wait_procs(started, timeout=15)
            if process.stdout is not None:
                process.stdout.close()
            errors.seek(0)
            stderr = errors.read().decode("utf-8", "replace")
    assert process.returncode == 0, stderr
    assert not alive, f"left running after serve exited: {alive}"


def _children(pid: int) -> List[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _first_line(process: subprocess.Popen, deadline_s: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=deadline_s):
            return f"(nothing within {deadline_s} s)"
    return process.stdout.readline()


def wait_for(url: str, status: int, deadline_s: float = 60) -> Tuple[int, str]:
    """GET ``url`` until it answers ``status`` (the first sample can take a moment), or give up."""
    end = time.monotonic() + deadline_s
    while True:
        answer = http_get(url)
        if answer[0] == status or time.monotonic() > end:
            return answer
        time.sleep(0.3)


# ---------------------------------------------------------------- the objects


def test_every_manifest_parses_and_the_kustomization_lists_them_all():
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))
    files = {path.name for path in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    objects = manifests()
    assert set(objects) == {"Namespace", "DaemonSet", "Service", "ServiceMonitor"}
    for kind, document in objects.items():
        assert document["metadata"]["name"] == "npuwatch", kind
        if kind != "Namespace":
            assert document["metadata"]["namespace"] == NAMESPACE, kind
    # The pod needs privileged, hostPID and hostPath: Pod Security's baseline level refuses them.
    assert objects["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_kubectl_kustomize_builds_the_same_objects():
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # an extra check where kubectl is installed; CI does not install it
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(KUBE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    built = {doc["kind"]: doc for doc in yaml.safe_load_all(out.stdout)}
    assert built == manifests()


#: Field names of the Kubernetes objects this DaemonSet uses (core/v1 PodSpec, Container, Probe,
#: VolumeMount): a misspelt field is dropped without a word by a client that does not validate.
POD_FIELDS = {
    "affinity", "tolerations", "nodeSelector", "hostPID", "hostNetwork", "hostIPC",
    "automountServiceAccountToken", "serviceAccountName", "enableServiceLinks", "priorityClassName",
    "terminationGracePeriodSeconds", "securityContext", "containers", "initContainers", "volumes",
}  # fmt: skip
CONTAINER_FIELDS = {
    "name", "image", "imagePullPolicy", "command", "args", "ports", "readinessProbe", "livenessProbe",
    "startupProbe", "resources", "securityContext", "env", "envFrom", "volumeMounts", "workingDir",
}  # fmt: skip
PROBE_FIELDS = {
    "httpGet", "exec", "tcpSocket", "grpc", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
    "failureThreshold", "successThreshold",
}  # fmt: skip
MOUNT_FIELDS = {"name", "mountPath", "readOnly", "subPath", "mountPropagation", "recursiveReadOnly"}


def test_the_pod_uses_only_field_names_kubernetes_knows():
    spec, box = pod_spec(), container()
    assert set(spec) <= POD_FIELDS, set(spec) - POD_FIELDS
    assert set(box) <= CONTAINER_FIELDS, set(box) - CONTAINER_FIELDS
    for name in ("readinessProbe", "livenessProbe"):
        assert set(box[name]) <= PROBE_FIELDS, (name, set(box[name]) - PROBE_FIELDS)
        assert set(box[name]["httpGet"]) <= {"path", "port", "scheme", "host", "httpHeaders"}
    for mount in box["volumeMounts"]:
        assert set(mount) <= MOUNT_FIELDS, mount
    for volume in spec["volumes"]:
        assert set(volume) in ({"name", "hostPath"}, {"name", "emptyDir"}), volume
        assert set(volume.get("hostPath", {})) <= {"path", "type"}, volume


def test_the_daemonset_selects_its_own_pods_and_the_service_selects_them_and_their_port():
    objects = manifests()
    daemonset, service = objects["DaemonSet"], objects["Service"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == container_port()["name"]
    assert port["port"] == container_port()["containerPort"] == DEFAULT_PORT
    assert service["spec"]["clusterIP"] == "None"  # headless: Prometheus scrapes each pod


def test_the_servicemonitor_selects_the_service_and_its_port_by_name():
    objects = manifests()
    monitor, service = objects["ServiceMonitor"], objects["Service"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    # No namespaceSelector: the ServiceMonitor looks in its own namespace, the Service's, even
    # after kustomize moves both.
    assert "namespaceSelector" not in monitor["spec"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = service["spec"]["ports"]
    assert endpoint["port"] == port["name"]
    assert endpoint["path"] == "/metrics"
    assert _seconds(endpoint["scrapeTimeout"]) < _seconds(endpoint["interval"])
    (relabel,) = endpoint["relabelings"]
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_node_name"]
    assert relabel["targetLabel"] == "node"  # what the rules' annotations and the fleet name a node by
    # The job is the Service's name (no jobLabel): the rules' NpuExporterDown must watch it.
    assert "jobLabel" not in monitor["spec"]
    assert re.fullmatch(exporter_down_job_regex(), service["metadata"]["name"])


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return int(match.group(1))


def exporter_down_job_regex() -> str:
    """The ``job=~"…"`` matcher of the rules' NpuExporterDown alert."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    (rule,) = [r for g in groups for r in g["rules"] if r.get("alert") == "NpuExporterDown"]
    match = re.search(r'job=~"([^"]+)"', rule["expr"])
    assert match, rule["expr"]
    return match.group(1)


def test_the_daemonset_runs_npuwatch_serve_with_options_it_accepts_on_the_documented_port():
    argv = [*container()["command"], *container()["args"]]
    assert argv[:2] == ["npuwatch", "serve"]
    args = build_parser(argv[1:]).parse_args(argv[1:])  # argparse exits (SystemExit) on a bad flag
    assert args.command == "serve"
    listen = parse_listen(args.listen)
    assert (listen.host, listen.port) == ("0.0.0.0", DEFAULT_PORT)
    assert container_port()["containerPort"] == listen.port


def test_the_probes_ask_paths_serve_answers_and_keep_answering_while_a_chip_is_in_alarm():
    probes = {name: container()[name] for name in ("readinessProbe", "livenessProbe")}
    for probe in probes.values():
        assert probe["httpGet"]["port"] == container_port()["name"]
        assert probe["timeoutSeconds"] < probe["periodSeconds"]
    argv = [*container()["command"][1:], *container()["args"]]
    with ExitStack() as stack:
        healthy = stack.enter_context(serve_demo(argv, "a3"))
        alarm = stack.enter_context(serve_demo(argv, "chip-alarm"))
        for base in (healthy, alarm):
            for name, probe in probes.items():
                status, body = wait_for(base + probe["httpGet"]["path"], 200)
                assert status == 200, (base, name, body[:300])
        # /healthz is the chips' verdict: the probes must not be on it, or a chip in Alarm would
        # restart the monitor (liveness) or stall the rollout (readiness).
        assert wait_for(healthy + "/healthz", 200)[1].startswith("healthy: 16/16 chips OK")
        status, body = wait_for(alarm + "/healthz", 503)
        assert (status, body.startswith("unhealthy: NPU 3")) == (503, True), body
        assert all(probe["httpGet"]["path"] != "/healthz" for probe in probes.values())


def test_the_daemonset_mounts_the_device_nodes_and_driver_read_only_at_their_host_paths():
    spec, box = pod_spec(), container()
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    host_mounts: Dict[str, Manifest] = {}
    for mount in box["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            assert mount.get("readOnly") is True, mount
            assert volume["hostPath"]["path"] == mount["mountPath"], mount  # the same place inside
            assert volume["hostPath"].get("type", "") not in CREATING_TYPES, volume
            host_mounts[mount["mountPath"]] = volume
    assert set(volumes) == {mount["name"] for mount in box["volumeMounts"]}  # none unused
    for node in DEVICE_NODES:
        assert host_mounts[node]["hostPath"]["type"] == "CharDevice", node
    for path in (*DRIVER_PATHS, *readme_docker_mounts()):
        assert any(path == m or path.startswith(m.rstrip("/") + "/") for m in host_mounts), path
    # The chips' /dev/davinciN: only a privileged container gets host devices without taking
    # them from jobs through the device plugin.
    assert box["securityContext"]["privileged"] is True
    assert box["securityContext"]["readOnlyRootFilesystem"] is True
    assert all("hostPath" not in v for v in volumes.values() if v["name"] == "tmp")


def readme_docker_mounts() -> List[str]:
    """The host paths README's ``docker run`` example mounts read-only, and its ``--device`` nodes
    other than the chips' own."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    mounts = re.findall(r"-v (/[^:\s]+):[^:\s]+:ro", text)
    devices = [d for d in re.findall(r"--device (/dev/\w+)", text) if not re.fullmatch(r"/dev/davinci\d+", d)]
    assert mounts and devices, "README's docker run example is gone"
    return sorted(set(mounts) | set(devices))


def test_the_daemonset_runs_only_on_npu_nodes_by_the_documented_label():
    (term,) = pod_spec()["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (NODE_LABEL, "In")
    assert NODE_LABEL_VALUE in expression["values"]
    for doc in (KUBE / "README.md", REPO / "README.md"):
        text = doc.read_text(encoding="utf-8")
        assert "kubectl label node " in text and f"{NODE_LABEL}={NODE_LABEL_VALUE}" in text, doc


def test_the_pod_runs_as_the_image_user_with_the_hwhiaiuser_group():
    security = pod_spec()["securityContext"]
    assert security["runAsNonRoot"] is True
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(rf"^USER {security['runAsUser']}$", dockerfile, re.MULTILINE)
    gid = re.search(r"groupadd --gid (\d+) HwHiAiUser", dockerfile)
    assert gid and int(gid.group(1)) in security["supplementalGroups"]


# ---------------------------------------------------------------- the PrometheusRule recipe


def test_the_prometheusrule_recipe_wraps_the_shipped_rules_unchanged(tmp_path: Path):
    """deploy/kubernetes/README.md's command that loads the alerting rules into the Operator."""
    text = (KUBE / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- prometheusrule -->\s*```(?:sh|bash)\n(.*?)```", text, re.DOTALL)
    assert match, "the PrometheusRule recipe is gone from deploy/kubernetes/README.md"
    script = match.group(1).replace("kubectl apply -f -", "cat")
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    rule = yaml.safe_load(out.stdout)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["spec"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the scrape config


def scrape_jobs() -> Dict[str, Manifest]:
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    return {job["job_name"]: job for job in config["scrape_configs"]}


def test_the_scrape_config_passes_promtool_with_the_rules_it_loads(tmp_path: Path):
    promtool = shutil.which("promtool")
    need(promtool is not None, "promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    assert config["rule_files"] == [RULES.name]
    out = _promtool_check(promtool, SCRAPE_CONFIG)
    if "field kubernetes_sd_configs not found" in out.stdout + out.stderr:
        # Debian's Prometheus is built without Kubernetes discovery: check every other job here;
        # the Kubernetes job's selection is checked against the DaemonSet below.
        config["scrape_configs"] = [j for j in config["scrape_configs"] if "kubernetes_sd_configs" not in j]
        copy = tmp_path / SCRAPE_CONFIG.name
        copy.write_text(yaml.safe_dump(config), encoding="utf-8")
        shutil.copy(RULES, tmp_path / RULES.name)
        out = _promtool_check(promtool, copy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr and RULES.name in out.stdout + out.stderr


def _promtool_check(promtool: str, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [promtool, "check", "config", config.name],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_scrape_job_is_one_the_exporter_down_alert_watches():
    jobs = scrape_jobs()
    assert len(jobs) >= 2
    for name, job in jobs.items():
        assert re.fullmatch(exporter_down_job_regex(), name), name
        assert job["metrics_path"] == "/metrics"
        assert _seconds(job["scrape_timeout"]) < _seconds(job["scrape_interval"])


def test_the_kubernetes_scrape_job_keeps_the_daemonset_pods_metrics_port_and_names_the_node():
    (job,) = [j for j in scrape_jobs().values() if "kubernetes_sd_configs" in j]
    (discovery,) = job["kubernetes_sd_configs"]
    assert discovery["role"] == "pod"
    assert discovery["namespaces"]["names"] == [NAMESPACE]
    pod_labels = manifests()["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    # What Prometheus' pod discovery gives this DaemonSet's pod (label names sanitised to _).
    meta = {
        f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}": v for k, v in pod_labels.items()
    }
    meta["__meta_kubernetes_pod_container_port_name"] = container_port()["name"]
    meta["__meta_kubernetes_pod_node_name"] = "npu-node-07"
    other_port = {**meta, "__meta_kubernetes_pod_container_port_name": "other"}
    assert _relabel(job["relabel_configs"], meta).get("node") == "npu-node-07"
    assert _relabel(job["relabel_configs"], other_port) == {}  # dropped


def _relabel(configs: List[Manifest], labels: Dict[str, str]) -> Dict[str, str]:
    """Prometheus' keep/replace relabelling (the parts the scrape config uses); {} = dropped."""
    labels = dict(labels)
    for config in configs:
        value = config.get("separator", ";").join(labels.get(name, "") for name in config["source_labels"])
        match = re.fullmatch(config.get("regex", "(.*)"), value)
        action = config.get("action", "replace")
        if action == "keep":
            if not match:
                return {}
        elif action == "replace":
            if match:
                labels[config["target_label"]] = match.expand(config.get("replacement", r"\1"))
        else:
            raise AssertionError(f"relabel action {action} not modelled")
    return labels


def test_the_static_scrape_job_on_a_real_prometheus_scrapes_serve_and_names_each_node(tmp_path: Path):
    need_prometheus()
    (job,) = [dict(j) for j in scrape_jobs().values() if "static_configs" in j]
    argv = [*container()["command"][1:], *container()["args"]]
    with ExitStack() as stack:
        bases = [stack.enter_context(serve_demo(argv, scenario)) for scenario in ("a3", "chip-alarm")]
        ports = [urllib.parse.urlsplit(base).port for base in bases]
        # Two names for this machine, so the node label tells the two targets apart.
        job["static_configs"] = [{"targets": [f"127.0.0.1:{ports[0]}", f"localhost:{ports[1]}"]}]
        job["scrape_interval"], job["scrape_timeout"] = "1s", "1s"
        config = yaml.safe_dump({"scrape_configs": [job]})
        prometheus = stack.enter_context(PrometheusServer(tmp_path, config=config))
        query = "count by (job, node) (npu_chip_info_health_status)"
        expected = {(job["job_name"], "127.0.0.1", "16"), (job["job_name"], "localhost", "8")}
        got: set = set()
        deadline = time.monotonic() + 90
        while got != expected:
            prometheus.assert_running()
            assert time.monotonic() < deadline, f"after 90 s: {got}"
            time.sleep(1)
            got = {
                (r["metric"].get("job"), r["metric"].get("node"), r["value"][1])
                for r in prometheus.query(query)
            }
        fleet = _fleet_json(prometheus.url)
    assert prometheus.process.returncode is not None
    # `npuwatch fleet` names each node by the label the job adds, the node with the chip in Alarm first.
    rows = [(n["node"], n["chips_total"], n["chips_ok"], n["level"], n["stale"]) for n in fleet["nodes"]]
    assert rows == [("localhost", 8, 7, "critical", False), ("127.0.0.1", 16, 16, "ok", False)], rows
    assert "NPU 3" in fleet["nodes"][0]["reasons"][0]


def _fleet_json(prometheus: str) -> Dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "npuwatch", "fleet", "--prometheus", prometheus, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-1000:] + out.stderr[-1000:]
    document: Dict[str, Any] = json.loads(out.stdout)
    return document
