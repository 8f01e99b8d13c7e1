"""Every exception class storlab defines: the errors that reach the user as one line (the CLI
prints them and exits 2, or a class's `exit_code`), then the internal signals that storlab catches itself."""

from __future__ import annotations

import re

#: C0 control characters but tab and newline, DEL, and the C1 range: what a terminal
#: obeys (ESC sequences, OSC titles and hyperlinks, cursor moves) rather than shows.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` (a program's output, a value a campaign wrote) for a terminal: each control
    character but newline and tab shown as `\\xNN`, so a run's stderr cannot move the
    cursor, rewrite the lines above it or set the window title on the operator's terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class StorlabError(Exception):
    """Bad input or a request storlab cannot honour; the message is shown as is."""


class SpaceError(StorlabError):
    """A parameter space (YAML or dict) is malformed."""

    def __init__(self, message: str, source: str | None = None, field: str | None = None):
        where = ": ".join(p for p in (source, field) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.field = field


class DesignError(StorlabError):
    """A design cannot be built as asked (too few runs, unknown generator, ...)."""


class AnalysisError(StorlabError):
    """A results table does not fit the analysis asked of it."""


class NotTwoLevel(AnalysisError):
    """Runs that are not a two-level design (a run off the factors' low/high levels and
    the center), asked for effects and ANOVA: other analyses (importance) read them."""


class UnitsError(StorlabError, ValueError):
    """A size, rate or mix that does not follow storlab's units grammar (`storlab.units`).
    Also a ValueError, so validators (pydantic) and older `except ValueError` still see it."""


class CampaignError(StorlabError):
    """A campaign file, its store or its runs cannot be used as asked."""


class CampaignLocked(CampaignError):
    """Another process is writing this campaign."""


class PlanMismatch(CampaignError):
    """A store holds the runs of another plan (other configurations under the same ids)."""


class TuneError(StorlabError):
    """A tuning request that cannot be honoured as asked."""


class RunsFailed(StorlabError):
    """Runs were made and none gave what the command needs (every run it made failed): not
    bad input, so the CLI exits 1 rather than 2."""

    exit_code = 1


class ReportError(StorlabError):
    """The inputs of a report cannot be used (unknown response, unreadable files...)."""


class EstimateError(StorlabError):
    """Input the read/write-mix model cannot use (0 throughput, bad mix, bad percentage...)."""


class MeasureRunsFailed(RunsFailed, EstimateError):
    """Every run of `estimate measure` failed or was refused: nothing to fit (exit 1)."""


class QuietDeviceError(EstimateError):
    """No quiet device could be made here (not root, no zram and no loop devices...)."""


class SimError(StorlabError):
    """A cluster file or override is malformed, or a simulation cannot run as asked."""


class ClusterError(StorlabError):
    """A cluster cannot be brought up, used or brought down as asked."""


class PortTaken(ClusterError):
    """A cluster's port is held by another process than the daemon storlab started."""


class LoadError(StorlabError):
    """A load specification or target that cannot be used."""


class RingFileError(StorlabError):
    """A ring file is missing, not a Swift ring, or not one storlab can use."""


class NetnsError(StorlabError):
    """A namespace LAN could not be made or used."""


# Internal signals: raised and caught inside storlab, which turns them into one of the errors
# above (or a failed run); they keep their built-in bases because callers catch those too.
class RingBuildError(ValueError):
    """The devices cannot hold the replicas (too few devices, no weight)."""


class EngineNotBuiltError(ImportError):
    """The compiled core is missing."""


class SubstitutionError(KeyError):
    """A `{name}` in a template names no factor or variable."""


class ShellTemplateError(ValueError):
    """A `shell: true` template that storlab cannot render safely."""


class YamlRefusal(ValueError):
    """A YAML value storlab's reader refuses (fileio's loader raises it with the line and
    what to write; read_yaml turns it into a one-line StorlabError naming the file)."""


class NamespaceGone(OSError):
    """Every task of a network namespace ended before the kernel could be asked about its
    sockets there (the host-socket listing then judges them by name alone)."""
