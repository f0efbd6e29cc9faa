"""Choosing the device a model runs on: arguments, ``$GUIDEWIRE_DEVICE`` and their errors."""

from __future__ import annotations

import pytest
import torch

from guidewire.runtime import load_model
from guidewire.runtime.errors import ModelLoadError
from guidewire.runtime.loading import resolve_device
from guidewire.runtime.registry import model_key


def test_default_is_the_cpu_and_the_environment_chooses(monkeypatch):
    monkeypatch.delenv("GUIDEWIRE_DEVICE", raising=False)
    assert resolve_device() == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    monkeypatch.setenv("GUIDEWIRE_DEVICE", "cpu")
    assert resolve_device() == torch.device("cpu")
    monkeypatch.setenv("GUIDEWIRE_DEVICE", "bogus0")
    with pytest.raises(ModelLoadError, match="bogus0"):
        resolve_device()
    assert resolve_device("cpu") == torch.device("cpu")   # the argument wins over the environment


@pytest.mark.parametrize("spec, message", [("nonsense", "invalid device"), ("meta", "only 'cpu' and 'cuda"),
                                           ("cuda:x", "invalid device")])
def test_bad_devices_are_typed_errors(spec, message):
    with pytest.raises(ModelLoadError, match=message):
        resolve_device(spec)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where there is no CUDA")
def test_cuda_without_cuda_fails_before_loading_weights(monkeypatch):
    with pytest.raises(ModelLoadError, match="CUDA is not available"):
        resolve_device("cuda")
    # load_model refuses before it converts or reads any weights (a missing model path is not reached)
    with pytest.raises(ModelLoadError, match="CUDA is not available"):
        load_model("/no/such/model.gguf", device="cuda")
    monkeypatch.setenv("GUIDEWIRE_DEVICE", "cuda:0")
    with pytest.raises(ModelLoadError, match="cuda:0"):
        load_model("/no/such/model.gguf")


def test_cached_models_are_kept_per_device(monkeypatch):
    monkeypatch.delenv("GUIDEWIRE_DEVICE", raising=False)
    assert model_key("smollm2") == ("smollm2", "cpu")
    monkeypatch.setenv("GUIDEWIRE_DEVICE", "cuda:1")
    assert model_key("smollm2") == ("smollm2", "cuda:1") != ("smollm2", "cpu")


def test_cli_device_flag_is_checked_before_loading(monkeypatch, capsys):
    from guidewire.cli import main

    monkeypatch.delenv("GUIDEWIRE_DEVICE", raising=False)
    assert main(["generate", "hi", "--device", "nonsense", "-q"]) == 2
    err = capsys.readouterr().err
    assert "invalid device 'nonsense'" in err and "Traceback" not in err
    if not torch.cuda.is_available():
        assert main(["generate", "hi", "--device", "cuda", "-q"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    import os

    assert "GUIDEWIRE_DEVICE" not in os.environ     # a refused device is not left behind
