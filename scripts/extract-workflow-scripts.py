"""Writes every `run:` script of the GitHub workflows in WORKFLOWS_DIR to OUT_DIR as a file of its
own, for shellcheck (scripts/test workflows). Each file starts the way the runner would start it:
the step's shell (its own, else the job's or the workflow's `defaults.run.shell`, else GitHub's
default, `bash -e`) as a shebang and the options that shell gets, so that shellcheck judges the
script as it will run. Fails (exit 1) when a script interpolates a `${{ }}` expression: the runner
pastes its value into the script's text, where a branch name or a variable's value becomes code;
values go in through `env:` instead. Prints the files it wrote."""

import pathlib
import re
import sys

import yaml

# What `shell:` means on a Linux runner (docs.github.com, "jobs.<job_id>.steps[*].shell").
SHELLS = {
    None: ("#!/usr/bin/env bash", "set -e"),
    "bash": ("#!/usr/bin/env bash", "set -eo pipefail"),
    "sh": ("#!/bin/sh", "set -e"),
}

workflows, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
problems = []
written = 0


def default_shell(node):
    return (((node or {}).get("defaults") or {}).get("run") or {}).get("shell")


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-")[:60]


for path in sorted([*workflows.glob("*.yml"), *workflows.glob("*.yaml")]):
    try:
        workflow = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        problems.append(f"{path.name} is not YAML: {error}")
        continue
    for job_id, job in (workflow.get("jobs") or {}).items():
        for index, step in enumerate(job.get("steps") or [], start=1):
            if "run" not in step:
                continue
            where = f"{path.name}: job {job_id}, step {index} ({step.get('name') or step['run'].splitlines()[0]})"
            if "${{" in step["run"]:
                problems.append(f"{where} interpolates ${{{{ }}}} into its script; pass the value through env:")
            shell = step.get("shell") or default_shell(job) or default_shell(workflow)
            if shell not in SHELLS:
                problems.append(f"{where} runs shell {shell!r}, which this check does not lint (bash or sh)")
                continue
            shebang, options = SHELLS[shell]
            target = out / f"{path.stem}--{slug(job_id)}--{index:02d}-{slug(step.get('name') or 'run')}.sh"
            target.write_text(f"{shebang}\n# {where}\n{options}\n{step['run']}")
            print(target)
            written += 1

if not written and not problems:
    problems.append(f"no run: scripts found under {workflows}")
for problem in problems:
    print(f"workflows: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
