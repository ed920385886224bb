"""`pip install distlab` as a user gets it: the sdist and wheel built from this checkout, the wheel installed with
its declared (core) dependencies only into a fresh venv outside the checkout, and the installed `distlab` run there.

One venv serves every test here (torch is the slow part of it). torch is pinned as scripts/setup.sh pins it
(`DISTLAB_TORCH`, default `torch==2.13.0`, the CPU wheel), so nothing downloads a CUDA build.
"""
import json, os, subprocess, sys, sysconfig, tarfile, zipfile
from pathlib import Path
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a venv with torch, then two multi-rank runs

REPO = Path(__file__).resolve().parents[1]
TORCH = os.environ.get("DISTLAB_TORCH", "torch==2.13.0")
LAB_ONLY = {"ipywidgets", "IPython"}  # what only the `lab` extra installs: distlab.ui.lab's widgets


def tracked(*pathspecs) -> list[str]:
    "Files git would put in a clean clone (tracked, or new and not ignored), under `pathspecs`."
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *pathspecs],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return sorted(f for f in out if (REPO / f).is_file())


def clean_env(venv: Path | None = None) -> dict:
    "The environment of a user's shell: no PYTHONPATH pointing into this checkout; `venv` activated when given."
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    if venv: env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    return env


def sh(argv, *, cwd, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict:
    "The sdist and the wheel, built (offline, with this venv's setuptools) from a copy of what a clean clone holds."
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for f in tracked():
        (src / f).parent.mkdir(parents=True, exist_ok=True); (src / f).write_bytes((REPO / f).read_bytes())
    # the default build: the sdist, then the wheel built from the unpacked sdist (so the sdist must be complete)
    p = sh([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], cwd=src, env=clean_env(), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (sdist,), (wheel,) = out.glob("*.tar.gz"), out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> Path:
    "A fresh venv outside the checkout with the wheel and its core dependencies: no extras."
    v = tmp_path_factory.mktemp("venv") / "v"
    assert REPO not in v.parents
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", v], check=True)
    # this venv's pip installs into the new one (--python): no ensurepip; --no-compile: modules compile on first import
    p = sh([sys.executable, "-m", "pip", "--python", v / "bin" / "python", "install", "-q", "--no-compile",
            "--disable-pip-version-check", TORCH, dists["wheel"]], cwd=v.parent, env=clean_env(), timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return v


def site_packages(v: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(v), "platbase": str(v)}))


def test_sdist_has_the_exported_package_setup_and_the_walkthroughs(dists):
    with tarfile.open(dists["sdist"]) as t: names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    package = tracked("distlab")  # nbdev's export: every module, subpackage and _modidx.py
    assert package and not set(package) - names, f"missing from the sdist: {sorted(set(package) - names)}"
    walkthroughs = tracked("examples/*.ipynb")
    assert walkthroughs and not set(walkthroughs) - names, f"missing from the sdist: {sorted(set(walkthroughs) - names)}"
    assert {"pyproject.toml", "setup.py", "README.md"} <= names


def test_wheel_ships_every_module_and_the_walkthroughs_as_package_data(dists):
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = set(z.namelist())
        missing = [f for f in tracked("distlab") if f not in names]
        assert not missing, f"modules missing from the wheel: {missing}"
        for f in tracked("examples/*.ipynb"):
            shipped = "distlab/walkthroughs/" + Path(f).name
            assert shipped in names and z.read(shipped) == (REPO / f).read_bytes(), shipped
        assert not [n for n in names if n.startswith(("examples/", "tests/", "nbs/"))]  # nothing loose in site-packages


def test_core_install_runs_the_cli_and_imports_everything_but_the_widgets(venv, tmp_path):
    env = clean_env(venv)
    p = sh([venv / "bin" / "distlab", "--help"], cwd=tmp_path, env=env)
    assert p.returncode == 0 and "tour" in p.stdout, p.stderr
    p = sh([venv / "bin" / "distlab", "list"], cwd=tmp_path, env=env)
    assert p.returncode == 0 and "uneven-batches" in p.stdout, p.stdout + p.stderr
    # only the declared core deps are there, and every module imports with them but the lab widgets
    code = ("import importlib, importlib.util, json, pkgutil, distlab\n"
            "missing = {}\n"
            "for m in pkgutil.walk_packages(distlab.__path__, 'distlab.'):\n"
            "    try: importlib.import_module(m.name)\n"
            "    except ModuleNotFoundError as e: missing[m.name] = e.name\n"
            "extras = {n: importlib.util.find_spec(n) is not None for n in ('jupyterlab', 'ipywidgets', 'pynvml', 'papermill')}\n"
            "print(json.dumps({'file': distlab.__file__, 'missing': missing, 'extras': extras}))")
    p = sh([venv / "bin" / "python", "-c", code], cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.splitlines()[-1])
    assert Path(got["file"]).is_relative_to(site_packages(venv)), got["file"]
    assert not any(got["extras"].values()), f"an extra's package is in the core install: {got['extras']}"
    assert set(got["missing"].values()) <= LAB_ONLY, f"modules that need more than the core deps: {got['missing']}"


def test_installed_lab_command_copies_the_walkthroughs_and_says_how_to_get_jupyterlab(venv, tmp_path):
    p = sh([venv / "bin" / "distlab", "lab", "my-lab"], cwd=tmp_path, env=clean_env(venv))
    assert p.returncode == 1, p.stdout + p.stderr  # no JupyterLab in a core install ...
    assert "pip install 'distlab[lab]'" in p.stderr and "jupyter lab" in p.stderr, p.stderr  # ... and how to get it
    for f in tracked("examples/*.ipynb"):  # the notebooks are copied all the same, ready for when it is installed
        assert (tmp_path / "my-lab" / Path(f).name).read_bytes() == (REPO / f).read_bytes(), f


def test_installed_tour_reproduces_uneven_batches_from_outside_the_checkout(venv, tmp_path):
    env, sp = clean_env(venv), site_packages(venv)
    p = sh([venv / "bin" / "python", "-c", "import distlab; print(distlab.__file__)"], cwd=tmp_path, env=env)
    assert Path(p.stdout.strip()).is_relative_to(sp), (p.stdout, p.stderr)
    p = sh([venv / "bin" / "distlab", "tour", "--only", "uneven-batches", "--nproc", "2", "--json"], cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    rows = {r["variant"]: r for r in json.loads(p.stdout)}  # stdout is the JSON alone: progress and table are on stderr
    broken, fixed = rows["broken"], rows["fixed"]
    assert broken["matched"] and broken["status"] == "hung" and broken["culprits"] == [1], broken["problems"]
    assert fixed["matched"] and fixed["status"] == "ok", fixed["problems"]
    assert all(Path(f).suffix == ".png" and (tmp_path / f).exists() for f in broken["plots"] + fixed["plots"])  # matplotlib
    run_dir = Path(broken["run_dir"])
    assert run_dir.is_relative_to(tmp_path), run_dir
    # the ranks ran the installed distlab too: their stacks name files in site-packages, none in the checkout
    stacks = "".join(f.read_text(errors="replace") for f in (run_dir / "stacks").glob("*"))
    assert f"{sp}/distlab/" in stacks and str(REPO / "distlab") not in stacks, stacks[:2000]


def test_installed_wheel_replays_recorded_runs_with_no_ranks(venv, tmp_path):
    "`distlab.ui.replay` from the wheel: the recordings ship, the lab's view fills in from one, no process starts."
    widgets = tmp_path / "lab-widgets"  # the lab extra's ipywidgets beside the venv (on PYTHONPATH), not in it: the core venv stays core
    p = sh([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--target", widgets, "ipywidgets"], cwd=tmp_path, env=clean_env())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    code = ("import json, sys\n"
            "spawned = []\n"
            "sys.addaudithook(lambda ev, a: ev in ('subprocess.Popen', 'os.fork', 'os.posix_spawn', 'os.exec', 'os.system') and spawned.append(ev))\n"
            "from distlab.ui import lab\n"
            "from distlab.ui.replay import recordings, recordings_dir\n"
            "m = lab.replay('uneven-batches', 'broken')  # the issue's spelling\n"
            "print(json.dumps({'dir': str(recordings_dir()), 'recordings': recordings(), 'status': m.status.value, 'diagnosis': m.diagnosis.value,\n"
            "                  'png': m.timeline_img.value[:4] == b'\\x89PNG', 'spawned': spawned}))")
    p = sh([venv / "bin" / "python", "-c", code], cwd=tmp_path, env=clean_env(venv) | {"PYTHONPATH": str(widgets)})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert Path(got["dir"]).is_relative_to(site_packages(venv)), got["dir"]
    shipped = sorted({tuple(Path(f).parts[1:3]) for f in tracked("recordings") if f.endswith("/result.json")})
    assert shipped and [tuple(r) for r in got["recordings"]] == shipped, (got["recordings"], shipped)
    assert ">hung<" in got["status"] and "Diagnosis: mismatch" in got["diagnosis"] and got["png"], got["status"]
    assert not got["spawned"], got["spawned"]
