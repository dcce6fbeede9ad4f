"""Issue 16 item 9: every configuration file is validated once, at load, and every problem is one
line `file: key: problem`: thresholds.yaml (with serving_slos), the alerting routes, the sources
file and the checks' playbooks, each fed a YAML syntax error, a binary file, a wrong shape, a value
that is not a number, an unknown name and (for playbooks) an entry without its steps."""

from pathlib import Path

import dagster as dg
import pytest

from checks.asset_checks import CATALOGUE
from checks.registry import playbooks
from orchestration.alerting.config import AlertingConfigError, load_config
from orchestration.config.thresholds import ThresholdsResource
from sources.config_file import ConfigError
from sources.mapping import load_prometheus_config, load_sources_file

pytestmark = pytest.mark.fault_injection

BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def thresholds(path: Path):
    """As a check loads it: the whole file against the signal catalogue."""
    try:
        return ThresholdsResource(path=str(path)).for_signal("busy_not_progressing", CATALOGUE["busy_not_progressing"], CATALOGUE)
    except dg.Failure as failure:
        raise ConfigError(failure.description) from None


def alerting(path: Path):
    return load_config(path)


def sources_file(path: Path):
    load_sources_file(path)
    return load_prometheus_config(path)


def playbook_folder(path: Path):
    folder = path.parent / "playbooks"
    folder.mkdir(exist_ok=True)
    (folder / "gpu.yaml").write_bytes(path.read_bytes())
    return playbooks(folder)


ALERTING_OK = "sinks: {file: {type: file}}\nroutes: [{sinks: [file]}]\n"
CASES = [
    # (loader, file content, the key or words the one line must name)
    (thresholds, "busy_not_progressing: {min_stall_seconds: 600\n", "not valid YAML: line"),
    (thresholds, BINARY, "not UTF-8 text"),
    (thresholds, "- busy_not_progressing\n", "expected `signal_name: {threshold: value}` mappings"),
    (thresholds, "busy_not_progressing: {min_stall_seconds: ten}\n", "min_stall_seconds: Input should be a valid number"),
    (thresholds, "busy_not_progresing: {min_stall_seconds: 600}\n", "busy_not_progresing: unknown signal; known: "),
    (thresholds, "busy_not_progressing: {min_stall_secs: 600}\n", "busy_not_progressing: has no threshold(s) min_stall_secs"),
    (thresholds, "busy_not_progressing: 600\n", "busy_not_progressing: expected `{threshold: value}`"),
    (thresholds, "busy_not_progressing: {min_stall_seconds: .nan}\n", "min_stall_seconds: Input should be a finite number"),
    (thresholds, "serving_slos: {chat: {ttft_p99_seconds: -1}}\n", "serving_slos.chat.ttft_p99_seconds: Input should be greater"),
    (alerting, "sinks: {file: {type: file}\n", "not valid YAML: line"),
    (alerting, BINARY, "not UTF-8 text"),
    (alerting, "[1, 2]\n", "Input should be a valid dictionary"),
    (alerting, ALERTING_OK + "retry: {attempts_per_tick: three}\n", "retry.attempts_per_tick: Input should be a valid integer"),
    (alerting, ALERTING_OK.replace("type: file", "type: teams"), "sinks.file.type: Input should be 'file', 'slack'"),
    (sources_file, "sources: [simulator\n", "not valid YAML: line"),
    (sources_file, BINARY, "not UTF-8 text"),
    (sources_file, "- simulator\n", "expected a mapping"),
    (sources_file, "prometheus: {step_seconds: fast}\n", "prometheus.step_seconds: Input should be a valid number"),
    (sources_file, "sources: [simulatr]\n", "sources: unknown source 'simulatr'"),
    (playbook_folder, "gpu_xid_fatal: {responder: x, steps: [a]\n", "not valid YAML: line"),
    (playbook_folder, BINARY, "not UTF-8 text"),
    (playbook_folder, "gpu_xid_fatal: {responder: on-call, escalation: [lead]}\n", "gpu_xid_fatal.steps: Field required"),
    (playbook_folder, "gpu_xid_fatal: {responder: on-call, steps: [a], escalation: lead, owner: x}\n", "gpu_xid_fatal.escalation"),
]


@pytest.mark.parametrize("loader, content, says", CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_a_bad_configuration_file_is_one_line_naming_the_file_and_the_key(tmp_path, loader, content, says):
    path = tmp_path / "config.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as info:
        loader(path)
    message = str(info.value)
    assert "\n" not in message and says in message, message
    assert message.startswith(str(path if loader is not playbook_folder else tmp_path / "playbooks" / "gpu.yaml") + ": ")
    assert loader is not alerting or isinstance(info.value, AlertingConfigError)


def test_good_files_load(tmp_path):
    """The look-alikes: valid files (and the repository's own) load without complaint."""
    path = tmp_path / "thresholds.yaml"
    path.write_text("busy_not_progressing: {min_stall_seconds: 600}\nserving_slos: {chat: {ttft_p99_seconds: 1, max_num_seqs: 64}}\n")
    assert thresholds(path)["min_stall_seconds"] == 600.0
    assert ThresholdsResource(path=str(path)).serving_slos() == {"chat": {"ttft_p99_seconds": 1.0, "max_num_seqs": 64.0}}
    assert thresholds(tmp_path / "absent.yaml") == dict(CATALOGUE["busy_not_progressing"])
    (tmp_path / "alerting.yaml").write_text(ALERTING_OK)
    assert alerting(tmp_path / "alerting.yaml").route({"tier": "SEV1"}) == ["file"]
    assert len(playbooks()) >= len(CATALOGUE)
    (tmp_path / "sources.yaml").write_text("sources: [simulator, prometheus]\nprometheus: {url: 'http://p:9090'}\n")
    assert sources_file(tmp_path / "sources.yaml").url == "http://p:9090"


def test_an_edited_thresholds_file_is_read_again(tmp_path):
    path = tmp_path / "thresholds.yaml"
    path.write_text("busy_not_progressing: {min_stall_seconds: 600}\n")
    assert thresholds(path)["min_stall_seconds"] == 600.0
    path.write_text("busy_not_progressing: {min_stall_seconds: 1200}\n")
    assert thresholds(path)["min_stall_seconds"] == 1200.0
