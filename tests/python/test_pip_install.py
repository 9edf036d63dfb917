#!/usr/bin/python3
"""test_pip_install.py — the package installs and runs outside the repository (issue 25, `pip install`).

    test_pip_install.py --lib build/libtinylm.so --work DIR

A copy of the working tree (git's tracked and untracked-not-ignored files) is installed with
`pip install --no-build-isolation --no-index` into a fresh venv (--system-site-packages, for
Debian's NumPy): setup.py builds libtinylm.so with CMake and puts it inside the package. Then,
from a folder outside the repository:
  - `import tinylm` is the venv's package, and it loads the library installed beside it;
  - examples/patch_name.py and examples/steer.py run on it and print what they print when run
    from the checkout (the same engine, the same numbers);
  - `python3 -m build --wheel --no-isolation` makes a platform wheel holding tinylm/libtinylm.so
    (when python3-build is installed; .ci/run installs it).
Exit 77 (skipped) without the venv module or cmake."""
import argparse
import os
import shutil
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
from harness import check, counts  # noqa: E402  (the check table the CLI tests share)



def run(cmd, cwd=None, env=None, timeout=900):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--lib", required=True, help="the build's libtinylm.so, for the runs in the checkout")
    a = ap.parse_args()
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if shutil.which("cmake") is None or run(["/usr/bin/python3", "-c", "import venv, ensurepip"])[0]:
        print("skipped: needs cmake and Python's venv + ensurepip (Debian: python3-venv)")
        return 77
    drop = ("TINYLM_LIB", "TINYLM_BUILD_DIR", "PYTHONPATH", "LD_PRELOAD", "ASAN_OPTIONS")
    env = {k: v for k, v in os.environ.items() if k not in drop}

    # the working tree, without build folders, .git or node_modules
    rc, out, err = run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "-z"])
    if not check(rc == 0, "git ls-files lists the tree", err):
        return 1
    src = os.path.join(work, "src")
    for rel in out.split("\0"):
        if not rel or not os.path.isfile(os.path.join(ROOT, rel)) or "node_modules" in rel.split("/"):
            continue
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), os.path.join(src, rel))

    venv = os.path.join(work, "venv")
    rc, _, err = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
    if not check(rc == 0, "python3 -m venv --system-site-packages", err):
        return 1
    py = os.path.join(venv, "bin", "python")
    rc, out, err = run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", src], env=env)
    if not check(rc == 0 and "Successfully installed tinylm" in out, "pip install --no-build-isolation --no-index "
                 "(CMake builds libtinylm.so)", out[-400:] + err[-800:]):
        return 1

    outside = os.path.join(work, "elsewhere")
    os.makedirs(outside)
    probe = ("import tinylm, tinylm._lib as l; lib = l.load_library(); print(tinylm.__file__); print(lib.path); "
             "m = tinylm.load(%r, tokenizer=%r); print(repr(m.generate('Once upon a time', n=12, temperature=0)))"
             % (os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")))
    rc, out, err = run([py, "-c", probe], cwd=outside, env=env)
    lines = out.splitlines()
    site = os.path.join(venv, "lib")
    check(rc == 0 and len(lines) == 3 and lines[0].startswith(site) and lines[1].startswith(site)
          and lines[1].endswith("tinylm/libtinylm.so") and "little girl" in lines[2],
          "from outside the repository: the venv's package and its own libtinylm.so run stories260K",
          out + err[-400:])

    for example in ("patch_name.py", "steer.py"):
        path = os.path.join(ROOT, "examples", example)
        rc1, out1, err1 = run([py, "-c", "import runpy, sys, tinylm; assert %r in tinylm.__file__; sys.argv = [%r]; "
                                         "runpy.run_path(%r, run_name='__main__')" % (site, path, path)],
                              cwd=outside, env=env)
        rc2, out2, err2 = run(["/usr/bin/python3", path], cwd=ROOT, env=dict(env, TINYLM_LIB=os.path.abspath(a.lib)))
        check(rc1 == 0 and rc2 == 0 and out1 == out2 and len(out1) > 20,
              "examples/%s on the installed package prints what it prints in the checkout" % example,
              (err1[-300:], err2[-300:], out1[-200:], out2[-200:]))

    if run(["/usr/bin/python3", "-c", "import build"])[0]:
        print("(python3-build is not installed: the wheel check is skipped)")
    else:
        dist = os.path.join(work, "dist")
        rc, out, err = run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, src],
                           env=env)
        wheels = [f for f in os.listdir(dist)] if os.path.isdir(dist) else []
        ok = rc == 0 and len(wheels) == 1 and wheels[0].endswith("linux_x86_64.whl")
        names = zipfile.ZipFile(os.path.join(dist, wheels[0])).namelist() if ok else []
        check(ok and "tinylm/libtinylm.so" in names and "tinylm/_lib.py" in names,
              "python3 -m build --wheel --no-isolation: a platform wheel holding libtinylm.so (%s)"
              % (wheels[0] if wheels else "-"), out[-300:] + err[-600:])
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
