"""cli.py — the `tinylm` command that `pip install` puts beside the package: it runs the C program
shipped inside the package (tinylm/bin/tinylm, the same build as a checkout's build/tinylm)."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _shipped():
    """the program installed in the package, else a checkout's build/tinylm; None when there is none"""
    for path in (os.path.join(_HERE, "bin", "tinylm"),
                 os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "tinylm")):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def program():
    """the tinylm program a script should run: TINYLM_CLI if set, else the shipped one (or None)"""
    return os.environ.get("TINYLM_CLI") or _shipped()


def main():
    path = _shipped()
    if path is None:
        sys.stderr.write("tinylm: the tinylm program is not installed beside the package (%s/bin/tinylm); "
                         "reinstall with `pip install .` from a checkout, or build it with CMake\n" % _HERE)
        return 127
    try:
        os.execv(path, ["tinylm"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("tinylm: cannot run %s: %s\n" % (path, e.strerror))
        return 126


if __name__ == "__main__":
    sys.exit(main())
