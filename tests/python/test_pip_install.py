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
  - the venv's `tinylm` command (the package's tinylm/bin/tinylm, run by tinylm/cli.py) generates
    what the build's tinylm generates;
  - the venv holds a `python3` kernel spec whose program is the interpreter that starts it, so a
    notebook run from the venv imports the venv's package (examples/*.ipynb themselves run from the
    venv in test_notebooks, which uses this test's venv);
  - `python3 -m build --wheel --no-isolation` makes a platform wheel holding tinylm/libtinylm.so,
    the program, the console command and the kernel spec (when python3-build is installed; the
    set-up of scripts/test.sh installs it);
  - pip with an interpreter that lacks `wheel` (a venv without the system's packages) fails before
    building, naming the missing module and the command that works with /usr/bin/python3 (not
    setuptools' "invalid command 'bdist_wheel'").
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
    ap.add_argument("--tinylm", required=True, help="the build's tinylm program, for the same runs")
    a = ap.parse_args()
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if shutil.which("cmake") is None or run(["/usr/bin/python3", "-c", "import venv, ensurepip"])[0]:
        print("skipped: needs cmake and Python's venv + ensurepip (Debian: python3-venv)")
        return 77
    drop = ("TINYLM_LIB", "TINYLM_BUILD_DIR", "PYTHONPATH", "LD_PRELOAD", "ASAN_OPTIONS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # setup.py's CMake build through ccache where it is installed (CMake reads the launcher from the
    # environment): the tree is copied to the same path each run, so a second run compiles nothing;
    # a launcher the caller chose is kept
    if shutil.which("ccache") and "CMAKE_C_COMPILER_LAUNCHER" not in env:
        env["CMAKE_C_COMPILER_LAUNCHER"] = "ccache"

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

    # the console command: the same program as the build's
    gen = ["generate", "--model", os.path.join(ROOT, "data", "stories260K.bin"), "--tokenizer",
           os.path.join(ROOT, "data", "tok512.bin"), "--prompt", "Once upon a time", "-n", "12", "--temperature", "0"]
    command = os.path.join(venv, "bin", "tinylm")
    rc1, out1, err1 = run([command] + gen, cwd=outside, env=env) if os.path.exists(command) else (-1, "", "no " + command)
    rc2, out2, err2 = run([os.path.abspath(a.tinylm)] + gen, cwd=outside, env=env)
    shipped = [os.path.join(r, f) for r, _, fs in os.walk(site) for f in fs if r.endswith(os.path.join("tinylm", "bin"))]
    check(rc1 == 0 and rc2 == 0 and out1 == out2 and "little girl" in out1 and len(shipped) == 1
          and os.access(shipped[0], os.X_OK),
          "the venv's `tinylm` command runs the package's tinylm/bin/tinylm: generate prints what build/tinylm prints",
          (out1, out2, err1[-300:], err2[-300:], shipped))
    rc, out, err = run([command, "no-such-command"], cwd=outside, env=env)
    check(rc != 0 and "no-such-command" in err, "`tinylm no-such-command` exits non-zero with the program's own message",
          (rc, err[-300:]))

    # the kernel spec: "python3" from the venv is the venv's interpreter, not /usr/bin/python3's spec
    # (jupyter_client starts a spec whose program is "python" with the interpreter that starts it;
    # test_notebooks runs the notebooks so and checks the kernel's sys.executable)
    probe = ("from jupyter_client.kernelspec import KernelSpecManager; s = KernelSpecManager().get_kernel_spec('python3'); "
             "print(s.resource_dir); print(s.argv[0])")
    if run(["/usr/bin/python3", "-c", "import jupyter_client"])[0]:
        print("(python3-nbclient is not installed: the kernel spec check is skipped)")
    else:
        rc, out, err = run([py, "-c", probe], cwd=outside, env=dict(env, PYDEVD_DISABLE_FILE_VALIDATION="1"))
        lines = out.split("\n")
        check(rc == 0 and len(lines) >= 2 and lines[0].startswith(os.path.join(venv, "share", "jupyter", "kernels"))
              and lines[1] == "python",
              "the venv's `python3` kernel spec is its own, run by the interpreter that starts it (%s)"
              % " ".join(lines[:2]), err[-400:])

    # an interpreter without `wheel`: refused before building, naming what is missing and what works
    bare = os.path.join(work, "bare")
    rc, _, err = run(["/usr/bin/python3", "-m", "venv", bare])
    if rc == 0 and run([os.path.join(bare, "bin", "python"), "-c", "import wheel"])[0]:
        rc, out, err = run([os.path.join(bare, "bin", "python"), "-m", "pip", "install", "--no-build-isolation",
                            "--no-index", src], env=env)
        text = out + err
        check(rc != 0 and "no `wheel` module" in text and "/usr/bin/python3 -m venv" in text
              and os.path.join(bare, "bin", "python") in text and "invalid command" not in text,
              "pip install with a Python that lacks `wheel`: refused, naming it and the command that works", text[-1200:])
    else:
        print("(a bare venv could not be made, or it has `wheel`: the interpreter check is skipped)")

    if run(["/usr/bin/python3", "-c", "import build"])[0]:
        print("(python3-build is not installed: the wheel check is skipped)")
    else:
        dist = os.path.join(work, "dist")
        rc, out, err = run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, src],
                           env=env)
        wheels = [f for f in os.listdir(dist)] if os.path.isdir(dist) else []
        ok = rc == 0 and len(wheels) == 1 and wheels[0].endswith("linux_x86_64.whl")
        names = zipfile.ZipFile(os.path.join(dist, wheels[0])).namelist() if ok else []
        entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_text = zipfile.ZipFile(os.path.join(dist, wheels[0])).read(entry[0]).decode() if entry else ""
        check(ok and "tinylm/libtinylm.so" in names and "tinylm/_lib.py" in names and "tinylm/bin/tinylm" in names
              and "tinylm = tinylm.cli:main" in entry_text
              and any(n.endswith(".data/data/share/jupyter/kernels/python3/kernel.json") for n in names),
              "python3 -m build --wheel --no-isolation: a platform wheel holding libtinylm.so, the tinylm program, "
              "the `tinylm` command and the kernel spec (%s)" % (wheels[0] if wheels else "-"), out[-300:] + err[-600:])
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
