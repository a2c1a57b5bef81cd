"""tools/install.sh is idempotent, honours an active venv and refuses an old Python; path.sh sets up."""

import os
import shutil
import subprocess

from conftest import ROOT, run_tool


def test_second_install_changes_nothing():
    stamp = ROOT / "tools" / "venv" / ".rnnt-requirements.sha256"
    out = run_tool(ROOT / "tools" / "install.sh")
    assert out.returncode == 0, out.stderr
    assert "is up to date" in out.stdout
    assert stamp.is_file()
    # The stamp is a hash of the pinned requirement files and torch is the pinned CPU build.
    import torch

    assert torch.__version__.startswith("2.13.0")


def test_old_python_in_active_venv_is_refused_clearly(tmp_path):
    fake = tmp_path / "oldvenv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\ncase "$1" in -V) echo "Python 3.9.18";; *) exit 1;; esac\n')
    fake.chmod(0o755)
    env = {**os.environ, "VIRTUAL_ENV": str(tmp_path / "oldvenv")}
    out = subprocess.run([ROOT / "tools" / "install.sh"], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert "using the active virtual environment" in out.stdout
    assert "Python >= 3.10 is required" in out.stderr and "Python 3.9.18" in out.stderr


def test_path_sh_sets_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    script = f". {ROOT}/path.sh && echo $RNNT_ROOT && echo $LC_ALL $PYTHONUNBUFFERED " \
             "&& command -v validate_data_dir.sh " \
             "&& python -c 'import rnnt, torch; print(rnnt.__file__)'"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    root, locale, tool, package = out.stdout.split("\n")[:4]
    assert root == str(ROOT)
    assert locale == "C 1"
    assert tool == str(ROOT / "utils" / "validate_data_dir.sh")
    assert package == str(ROOT / "rnnt" / "__init__.py")


def active_venv(tmp_path, name: str, python: str):
    """A virtual environment's layout whose python runs `python` (a wrapper: its own site-packages)."""
    fake = tmp_path / name / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    fake.chmod(0o755)
    return {**os.environ, "VIRTUAL_ENV": str(tmp_path / name)}


def test_path_sh_uses_an_active_venv_only_if_it_imports_this_checkout(tmp_path):
    """Another project's venv (its python without this rnnt) active: path.sh says so and uses tools/venv,
    where it ran the recipe's tools in the wrong environment; a venv tools/install.sh set up is used."""
    script = f". {ROOT}/path.sh && python -c 'import rnnt; print(rnnt.__file__)'"
    other = active_venv(tmp_path, "other", "/usr/bin/python3 -E -s")  # (-I would put no folder on its path)
    for where in (tmp_path, ROOT):  # from the repo's root, python -c found this rnnt in its current folder
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=other, cwd=where)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(ROOT / "rnnt" / "__init__.py")
        assert f"path.sh: the active environment {tmp_path / 'other'} does not import this checkout's rnnt; " \
               f"using {ROOT}/tools/venv" in out.stderr, where
    ours = active_venv(tmp_path, "ours", str(ROOT / "tools" / "venv" / "bin" / "python"))
    out = subprocess.run(["bash", "-c", f". {ROOT}/path.sh && echo $VIRTUAL_ENV"], capture_output=True, text=True,
                         env=ours, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == str(tmp_path / "ours") and out.stderr == "", out.stderr


def test_an_active_tools_venv_older_than_the_requirements_is_updated(tmp_path):
    """`. ./path.sh` in a shell, then a git pull that changes tools/requirements.txt: path.sh took the active
    tools/venv as it was (the stamp was checked only where it activated the venv itself)."""
    root = tmp_path / "checkout"
    (root / "tools" / "venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "path.sh", root / "path.sh")
    (root / "tools" / "install.sh").write_text("#!/bin/sh\necho install.sh ran >&2\n")
    (root / "tools" / "install.sh").chmod(0o755)
    python = root / "tools" / "venv" / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    stamp = root / "tools" / "venv" / ".rnnt-requirements.sha256"
    stamp.write_text("x\n")
    for name in ("requirements.txt", "constraints.txt"):
        (root / "tools" / name).write_text("torch==2.13.0\n")
        os.utime(root / "tools" / name, (1, 1))  # older than the stamp: up to date
    env = {**os.environ, "VIRTUAL_ENV": str(root / "tools" / "venv")}

    def sourced():
        return subprocess.run(["bash", "-c", f". {root}/path.sh"], capture_output=True, text=True, env=env).stderr
    assert "install.sh ran" not in sourced()
    os.utime(root / "tools" / "requirements.txt")  # pulled: newer than the stamp
    assert "is missing or not up to date; running tools/install.sh" in sourced() and "install.sh ran" in sourced()


def test_an_install_waits_for_one_under_way():
    """Two recipes started at once on a fresh clone each built tools/venv over the other: the second now waits for
    the install under way (held here as its lock), then finds the venv up to date."""
    import fcntl
    import time

    with open(ROOT / "tools" / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        waiting = subprocess.Popen([str(ROOT / "tools" / "install.sh")], stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        assert waiting.poll() is None  # waits while an install holds the lock
        fcntl.flock(lock, fcntl.LOCK_UN)
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and "is up to date" in out


def a_checkout(place, venv):
    """A checkout of path.sh and tools/ whose tools/venv is a link to `venv`, its requirements (torch, unpinned:
    met by any) older than the venv's stamp (up to date)."""
    (place / "tools").mkdir(parents=True)
    (place / "rnnt").mkdir()
    (place / "rnnt" / "__init__.py").write_text("")
    (place / "egs").mkdir()  # where a recipe sources path.sh (python -c imports from its folder: not the root)
    for name in ("path.sh", "tools/install.sh", "tools/unmet_pins.py"):
        shutil.copy(ROOT / name, place / name)
    (place / "tools" / "requirements.txt").write_text("torch\n")
    (place / "tools" / "constraints.txt").write_text("")
    for name in ("requirements.txt", "constraints.txt"):
        os.utime(place / "tools" / name, (1, 1))
    (place / "tools" / "venv").symlink_to(venv)
    return place


def test_a_venv_another_checkout_uses_is_refused_not_taken_over(tmp_path):
    """A clone's tools/venv linked to another checkout's: path.sh ran the other checkout's code in this one, and its
    install.sh, run for a newer requirements file, renamed the venv's checkout to the clone's, so every tool of the
    other ran the clone's code."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    os.makedirs(f"{site}/torch")
    open(f"{site}/torch/__init__.py", "w").close()
    first, clone = a_checkout(tmp_path / "first", venv), a_checkout(tmp_path / "clone", venv)
    wanted = subprocess.run(f"cat {first}/tools/requirements.txt {first}/tools/constraints.txt | sha256sum",
                            shell=True, capture_output=True, text=True).stdout.split()[0]
    (venv / ".rnnt-requirements.sha256").write_text(wanted + "\n")
    pth = f"{site}/rnnt-recipes.pth"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    script = ". ../path.sh && python -c 'import rnnt; print(rnnt.__file__)'"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=first / "egs")
    assert out.returncode == 0 and out.stdout.strip() == str(first / "rnnt" / "__init__.py"), out.stderr
    assert open(pth).read().strip() == str(first)
    out = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, env=env, cwd=clone / "egs")
    assert out.returncode == 1 and f"is the environment of the checkout {first}" in out.stderr, out.stdout + out.stderr
    assert open(pth).read().strip() == str(first)  # the first checkout's tools still run its own code
    out = subprocess.run([clone / "tools" / "install.sh"], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "a venv serves one checkout" in out.stderr and open(pth).read().strip() == str(first)
    shutil.rmtree(first)  # a checkout moved: the venv follows it
    out = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, env=env, cwd=clone / "egs")
    assert out.returncode == 0 and out.stdout.strip() == str(clone / "rnnt" / "__init__.py"), out.stderr


def test_unmet_pins_names_each_pin_not_installed_at_its_version(tmp_path):
    from importlib.metadata import version

    pins = tmp_path / "requirements.txt"
    pins.write_text(f"# a comment\npyyaml=={version('pyyaml')}\ntqdm==0.0.1  # another\nno-such-package==1.0\n"
                    f"torch=={version('torch').split('+')[0]}\n")
    out = run_tool(ROOT / "tools" / "unmet_pins.py", pins)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [f"tqdm: {version('tqdm')}, pinned 0.0.1",
                                       "no-such-package: not installed, pinned 1.0"]
    met = tmp_path / "met.txt"
    met.write_text(f"pyyaml=={version('pyyaml')}\n")
    assert run_tool(ROOT / "tools" / "unmet_pins.py", met).returncode == 0


def test_a_venv_with_a_package_changed_since_its_stamp_is_installed_again(tmp_path):
    """A pinned package upgraded by hand (here tqdm, seen at 0.0.1) in a venv whose stamp matches the requirements:
    install.sh called it up to date (it looked for torch alone), and the tests ran on other versions than the
    pins. The venv's python is a stand-in that logs `-m pip` and runs the rest."""
    fake = tmp_path / "shadow" / "tqdm-0.0.1.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: tqdm\nVersion: 0.0.1\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    (venv / "bin" / "python").write_text(
        f'#!/bin/sh\ncase "$1" in -m) echo "$*" >> {log}; exit 0;; esac\n'
        f'PYTHONPATH={tmp_path / "shadow"} exec {ROOT / "tools" / "venv" / "bin" / "python"} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    requirements = [ROOT / "tools" / "requirements.txt", ROOT / "tools" / "constraints.txt"]
    import hashlib

    stamp = hashlib.sha256(b"".join(path.read_bytes() for path in requirements)).hexdigest()
    (venv / ".rnnt-requirements.sha256").write_text(stamp + "\n")
    out = subprocess.run([ROOT / "tools" / "install.sh"], capture_output=True, text=True,
                         env={**os.environ, "VIRTUAL_ENV": str(venv)})
    assert out.returncode == 0, out.stderr
    assert "is up to date" not in out.stdout
    assert "differs from the pins (tqdm: 0.0.1, pinned 4.70.1)" in out.stdout
    assert "pip install" in log.read_text()
