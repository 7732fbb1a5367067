"""`det-k8s get values RELEASE`: what a release was installed with, as helm get values, secrets masked."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from .. import output
from ..common import HelmBinaryOpt, cluster, helm, kube_flags
from ..options import with_global_options
from ..output import OutputFormat
from ..release_options import ReleaseArg

app = typer.Typer(name="get", no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                  rich_markup_mode=None, help="Read what an installed release holds, as helm get does (secrets masked).")


class ValuesFormat(str, Enum):
    yaml = "yaml"
    json = "json"


def values_format(value: str | ValuesFormat) -> ValuesFormat:
    """-o yaml or json, as helm get values takes it; any other word is one line naming both."""
    if isinstance(value, ValuesFormat):
        return value
    try:
        return ValuesFormat(value.strip().lower())
    except ValueError:
        from ...errors import UsageError

        raise UsageError(f"-o {value}: not an output format of get values; the formats are yaml and json",
                         hint="e.g. -o json") from None


@app.command("values")
@with_global_options
def values(
    release: ReleaseArg,
    all_values: Annotated[bool, typer.Option("--all", "-a", help="All computed values, the chart's defaults "
                                                                    "included (default: what was passed).")] = False,
    revision: Annotated[int | None, typer.Option("--revision", metavar="N", min=1, max=2**31 - 1,
                                                 help="That revision's values (default: the latest).")] = None,
    output_format: Annotated[ValuesFormat, typer.Option("--output", "-o", parser=values_format,
                                                        metavar="FORMAT", help="yaml or json.")] = ValuesFormat.yaml,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """The values a release was installed with (helm get values), every password and key masked."""
    from ...release.names import validate_release_name
    from ...release.values import redact_values
    from ...tools.helm import get_values_argv

    validate_release_name(release)
    target = cluster()
    tool = helm(helm_binary, target)
    found = tool.json(get_values_argv(release, kube_flags(target.namespace), all_values=all_values,
                                      revision=revision)) or {}
    output.data(redact_values(found), OutputFormat(output_format.value))
