"""examples/python/two_branch.py as a test: PyTorch model -> graphpipe -> 2 workers, weights equal to
PyTorch's training on the same batches."""
import importlib.util
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "two_branch.py"


def test_two_branch_example_trains_like_pytorch():
    pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    spec = importlib.util.spec_from_file_location("two_branch", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    diff, losses, torch_losses = example.run(quiet=True)
    assert len(losses) == len(torch_losses) == 6
    assert diff < 1e-4
    for ours, theirs in zip(losses, torch_losses):
        assert ours == pytest.approx(theirs, rel=1e-4)
