"""Shared fixtures: the repository's test models and the CLI binary of the same build (to check that
Python and `graphpipe` agree)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GP_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
TORCH2 = ROOT / "tests" / "data" / "torch2"


@pytest.fixture(scope="session")
def cli():
    path = BUILD / "cli" / "graphpipe"
    if not path.exists():
        pytest.skip(f"the graphpipe CLI is not built at {path} (scripts/build.sh)")
    return str(path)


@pytest.fixture(scope="session")
def mlp_fixture():
    """torch 2.15's TorchScript export of a small MLP, with its data and torch's losses."""
    return TORCH2 / "mlp_torchscript"


@pytest.fixture(scope="session")
def gpt2tied_fixture():
    """torch 2.15's dynamo export of a tiny HF GPT-2 whose output projection is its embedding."""
    return TORCH2 / "gpt2tied_dynamo"


@pytest.fixture(scope="session")
def mmt():
    import graphpipe as gp
    return gp.load("zoo:mmt:tiny")
