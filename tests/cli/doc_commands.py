#!/usr/bin/env python3
"""Every command README.md and the guides (docs/guides/*.md) show is checked, and every concrete one is
run (issue 21 item 9).

Each `pact ...` command, inline in backticks or a line of a ```sh block, is first checked against the
binary: its subcommand must exist and every option it names must be in that subcommand's --help. Then:
  - a usage line (a placeholder such as MODEL or DIR, an [optional] part, `...`) is only checked;
  - a command named in prose (PROSE below: `pact run`, `pact capture -o`) is only checked;
  - a command CI runs itself, or one that needs what this machine may lack, is run elsewhere or skipped
    for the reason ELSEWHERE gives, said in the output;
  - every other command runs as written, in a scratch directory that links the checkout's inputs, so
    relative outputs land there (absolute /tmp paths are mapped into it), and must exit 0 (or end as
    OUTCOME says the docs describe); a command that needs an earlier one's output gets that first (SETUP).
A command the docs gain that is neither runnable nor listed fails the test, so the docs cannot drift.

Usage: doc_commands.py PACT REPO SCRATCH
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

PACT, REPO, SCRATCH = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
SOURCES = ["README.md"] + sorted(
    os.path.join("docs/guides", f) for f in os.listdir(os.path.join(REPO, "docs/guides")) if f.endswith(".md"))

# Commands the prose names (a subcommand, or an option in passing); checked against --help, not run.
PROSE = {
    "pact", "pact capture", "pact capture -o", "pact run", "pact discharge", "pact seal scan", "pact ledger run",
    "pact ledger check --receipt", "pact plan --require-receipts",
}
# Commands run by someone else, or that need what the machine may lack; value: why, or a predicate.
ELSEWHERE = {
    "pact ledger run --receipt-out build/ledger-receipt.json": ".ci/run runs it (it needs a clean tree)",
    "pact ledger check --receipt build/ledger-receipt.json": ".ci/run runs it after `pact ledger run`",
    "pact plan examples/models/digits_mlp.json --require-receipts --receipt build/ledger-receipt.json":
        ".ci/run runs it after `pact ledger run`",
    "pact bench --check": "a performance contract: it times Pact against its peers on the bench build, which no "
                          "test does (docs/testing.md); its options are checked above",
}
# Commands whose documented outcome is not exit 0: (exit code, what the output must say).
OUTCOME = {
    # docs/guides/contracts.md: without --coverage the line-coverage column is unmeasured and no gate passes.
    "pact contracts gate": (2, "no --coverage data: line coverage is unmeasured"),
}
# What a command needs first, run the same way (the README says to try discharge on the tiny config).
SETUP = {
    "pact discharge cap.json --against llama": ["pact capture llama --config tiny --structure-only -o cap.json"],
}
ROOT_ONLY = ("pact seal build",)  # the hermetic prebuild needs root and nvcc (docs/guides/sealed-artifacts.md)
TORCH = "/usr/bin/python3 tools/torch_export.py"


def extract():
    """(source, command) for every command, in document order; && chains split."""
    found = []
    for rel in SOURCES:
        text = open(os.path.join(REPO, rel), encoding="utf-8").read()
        pieces = []
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            pieces += block.splitlines()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        pieces += re.findall(r"`([^`]+)`", prose)  # an inline command may wrap onto the next line
        for piece in pieces:
            piece = re.sub(r"\s{2,}#.*$", "", piece).strip()  # a trailing comment
            for part in piece.split("&&"):
                part = " ".join(part.split())
                part = part.replace("./build/release/bin/pact", "pact")
                if part.startswith("pact ") or part == "pact" or part.startswith(TORCH):
                    if (rel, part) not in found:
                        found.append((rel, part))
    return found


def is_usage(command):
    for token in shlex.split(command.replace("[", " [ ").replace("]", " ] ")):
        if token in ("[", "]", "...") or re.fullmatch(r"[A-Z][A-Z_0-9]*(\.[a-z]+)?", token):
            return True
    return False


def help_of(words):
    r = subprocess.run([PACT] + words + ["--help"], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def check_usage(command):
    """The subcommand path and every option the command names exist: the problem, or None."""
    tokens = shlex.split(command.replace("[", " ").replace("]", " "))[1:]
    words = []
    rc, text = help_of(words)
    for t in tokens:
        if t.startswith("-") or not re.search(r"(?m)^Subcommands:", text):
            break
        if not re.search(r"(?m)^  " + re.escape(t) + r"\b", text):
            break
        words.append(t)
        rc, text = help_of(words)
        if rc != 0:
            return f"`pact {' '.join(words)} --help` exits {rc}"
    for t in tokens:
        if t.startswith("-") and t not in ("-", "--"):
            name = t.split("=")[0]
            if not re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", text):
                return f"`pact {' '.join(words)}` has no option {name}"
    return None


def run(command, cwd):
    """Runs a concrete command with /tmp paths mapped into the scratch directory; (rc, output)."""
    mapped = re.sub(r"(?<![\w.])/tmp/", SCRATCH + "/tmp/", command)
    argv = shlex.split(mapped)
    argv = [PACT] + argv[1:] if argv[0] == "pact" else argv
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    return r.returncode, (r.stdout + r.stderr)[-3000:]


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(os.path.join(SCRATCH, "tmp"))
    for name in ("examples", "contracts", "tests", "tools", "data", "bench"):  # inputs, read through links
        os.symlink(os.path.join(REPO, name), os.path.join(SCRATCH, name))
    commands = extract()
    failures, ran, checked = [], 0, 0
    have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    for source, command in commands:
        where = f"{source}: `{command}`"
        if command.startswith("pact"):
            problem = check_usage(command)
            checked += 1
            if problem:
                failures.append(f"{where}: {problem}")
                continue
        if is_usage(command) or command in PROSE:
            continue
        if command in ELSEWHERE:
            print(f"not run here: {where}: {ELSEWHERE[command]}")
            continue
        if command.startswith(ROOT_ONLY) and (os.geteuid() != 0 or not shutil.which("nvcc", path="/usr/local/cuda/bin")):
            print(f"skipped: {where}: needs root and the CUDA toolkit (nvcc), which this machine lacks")
            continue
        if TORCH in command and not have_torch:
            print(f"skipped: {where}: needs PyTorch (python3-torch), which this machine lacks")
            continue
        # Commands that read the git checkout run in it; they write nothing there.
        cwd = REPO if command.startswith("pact ledger") else SCRATCH
        if command == "pact ledger check --base-commit origin/main" and subprocess.run(
                ["git", "-C", REPO, "rev-parse", "--verify", "-q", "origin/main"], capture_output=True).returncode != 0:
            print(f"skipped: {where}: this checkout has no origin/main")
            continue
        for step in SETUP.get(command, []):
            rc, out = run(step, cwd)
            if rc != 0:
                failures.append(f"{where}: its setup `{step}` exited {rc}:\n{out}")
        rc, out = run(command, cwd)
        ran += 1
        print(f"ran ({rc}): {where}")
        want_rc, says = OUTCOME.get(command, (0, ""))
        if rc != want_rc or says not in out:
            failures.append(f"{where}: exited {rc} (the docs say {want_rc}" + (f", saying '{says}'" if says else "") +
                            f"):\n{out}")
    print(f"doc commands: {len(commands)} found, {checked} checked against --help, {ran} run, "
          f"{len(failures)} failed")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
