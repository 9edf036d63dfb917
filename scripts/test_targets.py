#!/usr/bin/env python3
"""test_targets.py BUILD_DIR < ctest --show-only=json-v1 ...: the CMake targets whose files (programs,
libraries) the listed tests run or name (in their commands and environments, as the build's
CTestTestfile.cmake files give them: ctest's own listing leaves out a program not built yet), one a line, so that scripts/test.sh builds only those for a
partial run (the OpenBLAS build's numerics tests). The build directory must have been configured with
the file API query BUILD_DIR/.cmake/api/v1/query/codemodel-v2 in place (test.sh writes it): CMake's
reply maps each target to its artifacts. Exits 1 when the reply is missing, so that the caller builds
everything instead."""
import glob
import json
import os
import re
import sys


def main():
    build = os.path.abspath(sys.argv[1])
    replies = glob.glob(os.path.join(build, ".cmake", "api", "v1", "reply", "index-*.json"))
    if not replies:
        print("test_targets.py: no CMake file API reply in %s" % build, file=sys.stderr)
        return 1
    reply = os.path.dirname(max(replies))
    index = json.load(open(max(replies)))
    model = next(o for o in index["objects"] if o["kind"] == "codemodel")
    codemodel = json.load(open(os.path.join(reply, model["jsonFile"])))
    artifact_target = {}
    for config in codemodel["configurations"]:
        for t in config["targets"]:
            target = json.load(open(os.path.join(reply, t["jsonFile"])))
            for a in target.get("artifacts", []):
                p = a["path"] if os.path.isabs(a["path"]) else os.path.join(build, a["path"])
                artifact_target[os.path.normpath(p)] = target["name"]
    wanted = {t["name"] for t in json.load(sys.stdin)["tests"]}
    words = []
    for root, _, files in os.walk(build):
        if "CTestTestfile.cmake" in files:
            for line in open(os.path.join(root, "CTestTestfile.cmake"), encoding="utf-8"):
                m = re.match(r"(add_test|set_tests_properties)\(\[=\[(.*?)\]=\]", line)
                if m and m.group(2) in wanted:
                    words += [w.split("=", 1)[-1] for w in re.findall(r'"([^"]*)"', line)]
    names = set()
    for w in words:
        for part in w.split(os.pathsep):
            name = artifact_target.get(os.path.normpath(part)) if part.startswith("/") else None
            if name:
                names.add(name)
    for n in sorted(names):
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
