"""The sources file's `sources:` list: which producers run, validated with one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.prometheus_pull import prometheus_pull
from orchestration.storage.raw_zone import RawZoneResource
from sources.mapping import SOURCE_NAMES, ConfigError, load_sources_file, require_source
from sources.prometheus import PrometheusResource

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "sources.example.yaml"
KEY = "2026-11-30-03:00"


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    return path


def test_no_file_means_the_simulator():
    sources = load_sources_file(None)
    assert sources.names() == ("simulator",) and not sources.explicit
    assert "gpu_samples" in sources.expected_raw_folders()


def test_the_documented_example_file_is_valid():
    sources = load_sources_file(EXAMPLE)
    assert sources.names() == ("prometheus", "client", "predictions")
    assert sources.uses("prometheus") and not sources.uses("agent", default=True)
    assert set(sources.expected_raw_folders()) == {"gpu_samples", "serving_metrics", "training_steps", "lineage",
                                                   "predictions", "prediction_outcomes"}


@pytest.mark.parametrize("text, message", [
    ("sources: [simulator, nvml]\n", "sources: unknown source 'nvml'; known: simulator, agent, prometheus"),
    ("sources: []\n", "sources: list at least one source"),
    ("sources: simulator\n", "sources: Input should be a valid list"),
    ("source: [simulator]\n", "source: Extra inputs are not permitted"),
])
def test_bad_lists_are_one_line_naming_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_sources_file(path)
    assert str(caught.value).startswith(f"{path}: {message}") and "\n" not in str(caught.value)


def test_listed_sources_decide_and_duplicates_count_once(tmp_path):
    sources = load_sources_file(write(tmp_path, "sources: [agent, client, agent]\n"))
    assert sources.names() == ("agent", "client")
    assert sources.uses("agent") and not sources.uses("simulator", default=True)
    assert set(SOURCE_NAMES) >= {"simulator", "agent", "prometheus", "scrape", "client", "tensorboard", "megatron",
                                 "predictions"}
    with pytest.raises(ConfigError, match="`scrape` is not listed"):
        require_source(write(tmp_path, "sources: [agent]\n"), "scrape")
    assert require_source(None, "agent").names() == ("simulator",)   # no file: nothing is refused


def _pull(tmp_path, config_file: Path, url: str = ""):
    resources = {"raw_zone": RawZoneResource(root=str(tmp_path / "raw")),
                 "prometheus": PrometheusResource(url=url, config_file=str(config_file))}
    return dg.materialize([prometheus_pull], resources=resources, partition_key=KEY, raise_on_error=False)


def test_prometheus_pull_skips_unless_listed_even_with_a_url(tmp_path):
    # An address nothing listens on: if the pull ran it would record an 'unreachable' error.
    result = _pull(tmp_path, write(tmp_path, "sources: [simulator]\n"), url="http://127.0.0.1:9")
    assert result.success
    meta = result.asset_materializations_for_node("prometheus_pull")[0].metadata
    assert meta["enabled"].value is False and "not in the sources file" in meta["note"].value
    assert not (tmp_path / "raw").exists()


def test_prometheus_listed_without_a_url_fails_with_the_fix(tmp_path):
    result = _pull(tmp_path, write(tmp_path, "sources: [prometheus]\n"))
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "sources lists `prometheus` but no URL is set" in failure.event_specific_data.error.message


def test_prometheus_listed_with_a_url_pulls(tmp_path):
    path = write(tmp_path, "sources: [prometheus]\nprometheus: {url: 'http://127.0.0.1:9', timeout_seconds: 1}\n")
    result = _pull(tmp_path, path)
    assert result.success
    meta = result.asset_materializations_for_node("prometheus_pull")[0].metadata
    assert meta["enabled"].value is True and "unreachable" in meta["error"].value   # it tried


def test_agent_refuses_a_file_that_does_not_list_it(tmp_path):
    path = write(tmp_path, "sources: [prometheus]\nprometheus: {url: 'http://p:9090'}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "GOODPUT_SOURCES_CONFIG")}
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "agent", "--config", str(path), "--count", "1",
                           "--home", str(tmp_path / "home")], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].endswith("sources: `agent` is not listed (prometheus); "
                                                          "add it to `sources:` to run it with this file")
