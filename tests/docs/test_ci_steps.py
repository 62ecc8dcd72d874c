""".ci/run checks what a newcomer and a downstream user get: the README main job on a bare
install runs before any extra is installed anywhere, and the built wheel is tested in a
downstream project. (Both steps run for real in CI; ``bash .ci/run STEP`` runs one alone.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def top_level_lines() -> list[str]:
    """The script's lines outside function bodies (what runs, in order)."""
    lines, depth = [], 0
    for line in SCRIPT.splitlines():
        if re.match(r"^[a-z_]+\(\) \{", line):
            depth += not line.rstrip().endswith("}")  # a one-line function opens no body
            continue
        if depth and line == "}":
            depth -= 1
            continue
        if not depth:
            lines.append(line.strip())
    return lines


def test_the_bare_main_job_runs_first_with_ci_unset_in_its_own_virtualenv() -> None:
    run = top_level_lines()
    first_install = next(i for i, line in enumerate(run) if "pip install" in line)
    assert run.index("bare_main_job") < first_install
    body = SCRIPT.split("bare_main_job() {", 1)[1].split("\n}\n", 1)[0]
    assert "unset CI" in body
    assert "python3 -m venv .ci-venv-bare" in body
    assert 'main_command="$(readme_block main-job)"' in body
    assert 'eval "$main_command"' in body
    assert "pip install" not in body.replace("pip install -q --upgrade pip", "")
    assert "grep -qx 'verdict: conformant'" in body
    assert 'check_report "$report"' in body


def test_the_wheel_not_the_checkout_is_tested_downstream() -> None:
    assert "published_wheel" in top_level_lines()
    body = SCRIPT.split("published_wheel() {", 1)[1].split("\n}\n", 1)[0]
    assert "-m build --outdir" in body
    assert "-m twine check --strict" in body
    assert 'pip install -q "${wheel}[testing]"' in body
    assert "-e ." not in body
    assert 'cp -R examples/downstream "$work/downstream"' in body
    assert "--polyloop-conformance" in body


def test_the_ray_tests_run_in_their_own_step_after_the_main_tests() -> None:
    """Ray is its own extra, not part of [dev]: the main test command leaves the `ray` tests
    out, and CI installs the extra and runs them in a step of their own, after the main tests
    (so those ran without Ray), with CI still set (a missing extra fails instead of skipping)."""
    import tomllib

    run = top_level_lines()
    assert run.index("ray_tests") > run.index('eval "$test_command"')
    body = SCRIPT.split("ray_tests() {", 1)[1].split("\n}\n", 1)[0]
    assert 'ray_command="$(readme_block ray-test-command)"' in body
    assert 'eval "$ray_command"' in body
    assert "unset CI" not in body
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    main = re.search(r"<!-- ci:test-command -->\n```bash\n(.+?)\n```", readme)
    ray = re.search(r"<!-- ci:ray-test-command -->\n```bash\n(.+?)\n```", readme)
    assert main is not None
    assert ray is not None
    assert '-m "not ray and not slow"' in main.group(1)
    assert ray.group(1) == "pip install -e '.[ray]' && pytest -m ray"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    assert any(spec.startswith("ray") for spec in extras["ray"])
    assert not any("ray" in spec for spec in extras["dev"])
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"][
        "ini_options"
    ]["markers"]
    assert any(marker.startswith("ray:") for marker in markers)


def test_the_slow_tests_run_in_their_own_step_right_after_the_everyday_suite() -> None:
    """The README's everyday command leaves the `slow` tests out; CI runs them in the next step,
    from the README's slow-test block, adding to the same coverage data."""
    run = [line for line in top_level_lines() if line and not line.startswith(("#", "step "))]
    assert run.index('eval "$slow_command"') == run.index('eval "$test_command"') + 1
    assert 'slow_command="$(readme_block slow-test-command)"' in run
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    slow = re.search(r"<!-- ci:slow-test-command -->\n```bash\n(.+?)\n```", readme)
    assert slow is not None
    assert slow.group(1) == 'pytest -n 2 -m "slow and not ray" --cov --cov-append --cov-report=term'
