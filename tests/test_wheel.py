"""`pip install .` is a real wheel: built from the checkout, installed into a fresh venv outside it,
`goodput demo` runs from the wheel's own files (SQL, playbooks, scenarios, workspace) and nothing
of the checkout.

The fresh venv gets the wheel alone (`--no-deps`); its third-party dependencies come from the
project venv's site-packages through a `.pth` path line, so the test needs no download. A path line
does not run that directory's own `.pth` files, so the checkout's editable install stays out."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_wheel_installed_outside_the_checkout_runs_the_demo(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
                   check=True, capture_output=True, text=True)
    (wheel,) = wheels.glob("goodput-*.whl")
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "goodput_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # without PYTHONPATH: pointed at a checkout (how the tests are run from a worktree), it shows the checkout's
    # goodput.egg-info to pip, which then takes goodput as installed and skips the wheel
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, text=True, env=clean)

    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    where = subprocess.run([str(python), "-c", "import orchestration.storage.sql as s, checks; print(s.SQL_ROOT); print(checks.__file__)"],
                           cwd=elsewhere, env=env, check=True, capture_output=True, text=True).stdout.split()
    assert all(line.startswith(str(site)) for line in where), where   # the wheel's files, not the checkout's
    # the small scenario the wheel ships (2 GPUs), its first hour: the same code path as the default demo
    # (every file the wheel must ship is read by one hour's detect, fold and score), and the hang (00:50)
    # is flagged within it
    small = site / "simulator" / "scenarios" / "small.yaml"
    assert small.is_file()
    demo = subprocess.run([str(env_dir / "bin" / "goodput"), "demo", "--home", str(elsewhere / "home"),
                           "--scenario", str(small), "--hours", "1"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "hang" in demo.stdout and "recall" in demo.stdout.lower()
    assert (elsewhere / "home" / "warehouse.duckdb").is_file()
