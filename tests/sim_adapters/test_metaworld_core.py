"""The Meta-World family as the core environment sees it (no Meta-World installed here): its 50
tasks are listed, and running one says in one line where Meta-World lives."""

import importlib.util

import pytest

from pear_agent.cli import main
from pear_agent.loop.registry import family_of


def test_listed_without_metaworld_installed():
    fam = family_of("metaworld/pick-place-v3")
    assert fam.name == "metaworld" and len(fam.task_names()) == 50


@pytest.mark.skipif(importlib.util.find_spec("metaworld") is not None, reason="Meta-World is installed here")
def test_running_one_without_metaworld_is_a_one_line_error(capsys):
    assert main(["run", "--task", "metaworld/reach-v3", "--no-video"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1].startswith("pear-agent: error: Meta-World is not installed")
        and "setup_metaworld.sh" in err[-1]
    )
    assert not any("Traceback" in line for line in err)
