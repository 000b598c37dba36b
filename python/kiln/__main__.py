"""python3 -m kiln compile|run|tune|cache ARGS: the command-line tools
(kiln-compile, kiln-run, kiln-tune, kiln-cache) with the same arguments,
found beside this package's build or install, else on PATH."""
import os
import shutil
import sys

TOOLS = {"compile": "kiln-compile", "run": "kiln-run", "tune": "kiln-tune",
         "cache": "kiln-cache"}


def find(tool):
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.join(here, "..", "..", "bin"), os.path.join(here, "..", "bin")):
        path = os.path.join(folder, tool)
        if os.access(path, os.X_OK):
            return os.path.normpath(path)
    return shutil.which(tool)


def main(argv):
    if len(argv) < 1 or argv[0] not in TOOLS:
        print("usage: python3 -m kiln compile|run|tune|cache ARGS (the arguments of "
              "kiln-compile, kiln-run, kiln-tune, kiln-cache; --help for each)",
              file=sys.stderr)
        return 2
    tool = find(TOOLS[argv[0]])
    if not tool:
        print(f"kiln: {TOOLS[argv[0]]} is not built or installed", file=sys.stderr)
        return 1
    os.execv(tool, [tool] + argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
