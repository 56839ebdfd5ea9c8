"""What ``attnrmt run`` shows: every line of a Snakemake step goes to the run's log; the
screen, under the live bar, gets our own ``attnrmt`` messages once (not the per-block and
progress lines the bar stands for), errors in full (up to the next line of job chatter) and
lines before the first recognised one (docs/cluster.md, "Long sweeps";
docs/architecture.md says why not Snakemake's own settings). Cost: O(1) per line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_WEEKDAY = r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_CHATTER = re.compile(
    r"^("
    rf"\[{_WEEKDAY} .*\]$"  # the time stamp before each job
    r"|(local)?(rule|checkpoint) \S+:$"  # a job's banner (its indented lines follow)
    r"|Select jobs to execute|Execute \d+ jobs|Finished jobid|\d+ of \d+ steps"
    r"|Building DAG of jobs|Using shell:|Provided (cores|resources|remote nodes)"
    r"|Rules claiming more threads|Job stats:|Using workflow specific profile"
    r"|Assuming unrestricted shared filesystem|Shell command:|Creating report"
    r"|Adding |Report created|Downloading resources|Loading script code"
    r"|Complete log\(s\):|Elapsed time:|Trying to restart job|Nothing to be done"
    r"|Shutting down, this might take|Removing output files of failed job"
    r"|Will exit after finishing currently running jobs|Terminating processes on user"
    r"|SNAKEMAKE$|host: |Activating |Waiting (at most|for )"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - "  # Python logging (Dask's processes)
    r")"
)
_ERROR_START = re.compile(
    r"^(Error in (rule|group)|Error:|RuleException|WorkflowError|Traceback \(most recent"
    r"|\w*(Error|Exception)\b|Exiting because|Logfile \S.*:)"
)
_OURS = re.compile(r"^attnrmt\b")
#: Our lines the bar stands for: the progress line, each block's summary, the cluster's end.
_OUR_CHATTER = re.compile(r"^attnrmt: (progress |\S+ block [0-9a-f]+: |Dask cluster closed)")
_STEPS = re.compile(r"^(\d+) of (\d+) steps")
_JOB_TOTAL = re.compile(r"^total\s+(\d+)$")  # last row of Snakemake's job table
_RULE_STARTED = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
#: Lines of an error block that say nothing (Snakemake prints them for `run:` rules).
_EMPTY_DETAIL = re.compile(r"^\s+message: None$|^Shell command: None$")


def message_key(line: str) -> str:
    """Our message without its ``attnrmt ...:`` prefix. O(len(line))."""
    return line.split(": ", 1)[-1]


@dataclass
class OutputSplitter:
    """Decides line by line what of a Snakemake step's output reaches the screen (lines before
    the first recognised one are shown)."""

    showing: bool = True
    steps_done: int | None = None
    steps_total: int | None = None
    rule: str | None = None
    """The rule of the last job Snakemake started."""
    error_lines: list[str] = field(default_factory=list)
    """Every line shown as part of an error block, in order."""
    seen: set[str] = field(default_factory=set)
    """Our messages shown so far, without their ``attnrmt ...:`` prefix (each once: the
    driver's own ``attnrmt run: warning: X`` and the Snakefile's ``attnrmt: warning: X``
    are one message)."""

    def screen_line(self, line: str) -> str | None:
        """``line`` (no newline) if it goes to the screen, else None; updates the stage."""
        if _OURS.match(line):
            self.showing = not _OUR_CHATTER.match(line)
            seen = message_key(line)
            if not self.showing or seen in self.seen:
                return None
            self.seen.add(seen)
            return line
        if total := _JOB_TOTAL.match(line):
            self.steps_total = int(total.group(1))
        if steps := _STEPS.match(line):
            self.steps_done, self.steps_total = int(steps.group(1)), int(steps.group(2))
        if started := _RULE_STARTED.match(line):
            self.rule = started.group(1)
        if _CHATTER.match(line):
            self.showing = False
            return None
        if _ERROR_START.match(line):
            self.showing = True
        if not self.showing or not line.strip() or _EMPTY_DETAIL.match(line):
            return None
        self.error_lines.append(line)
        return line

    def stage(self) -> str | None:
        """``"step 3/11 gather_cells"`` (what Snakemake last reported), or None."""
        if self.steps_total is None and self.rule is None:
            return None
        done = self.steps_done if self.steps_done is not None else 0
        steps = f"step {done}/{self.steps_total}" if self.steps_total is not None else ""
        return " ".join(part for part in (steps, self.rule or "") if part)
