import pytest

from campusguard.backends import devices
from campusguard.backends.devices import DeviceSpec, GpuInfo, parse_device, resolve_device
from campusguard.doctor import backend_verdicts, check_visible_devices
from campusguard.errors import DeviceError, InvalidInputError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cpu", DeviceSpec("cpu")),
        ("auto", DeviceSpec("auto")),
        (None, DeviceSpec("auto")),
        ("cuda", DeviceSpec("cuda", 0)),
        ("cuda:3", DeviceSpec("cuda", 3)),
        ("ROCm:1", DeviceSpec("rocm", 1)),
    ],
)
def test_parse_device(text, expected):
    assert parse_device(text) == expected


@pytest.mark.parametrize("text", ["tpu", "cuda:-1", "cuda:x", "mps:0", ""])
def test_parse_device_rejects(text):
    with pytest.raises(InvalidInputError):
        parse_device(text)


@pytest.fixture
def two_amd(monkeypatch):
    gpus = (
        GpuInfo("amd", 0, "AMD Instinct MI300X", 192 * 2**30),
        GpuInfo("amd", 1, "AMD Instinct MI300X", 192 * 2**30),
    )
    monkeypatch.setattr(devices, "list_gpus", lambda: gpus)
    return gpus


def test_resolve_device_on_amd_machine(two_amd):
    assert resolve_device("auto") == DeviceSpec("rocm", 0)
    assert resolve_device("1") == DeviceSpec("rocm", 1)
    assert resolve_device("rocm:1") == DeviceSpec("rocm", 1)
    with pytest.raises(DeviceError, match=r"rocm:2 requested, available: cpu, rocm:0 \(AMD Instinct MI300X\), rocm:1"):
        resolve_device("rocm:2")
    with pytest.raises(DeviceError, match="cuda:0 requested"):
        resolve_device("cuda:0")


def test_visible_devices_renumber(monkeypatch):
    gpus = [GpuInfo("nvidia", i, f"GPU{i}") for i in range(4)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    seen = devices._apply_visible(gpus, "CUDA_VISIBLE_DEVICES")
    assert [(g.index, g.name) for g in seen] == [(0, "GPU2"), (1, "GPU3")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,7,2")  # the runtime stops at the first invalid entry
    assert [g.name for g in devices._apply_visible(gpus, "CUDA_VISIBLE_DEVICES")] == ["GPU1"]


@pytest.mark.parametrize(
    "env, physical, problem",
    [
        ({"HIP_VISIBLE_DEVICES": "0,4"}, 2, "ordinal 4 does not exist"),
        ({"CUDA_VISIBLE_DEVICES": ""}, 1, "empty"),
        ({"ROCR_VISIBLE_DEVICES": "abc"}, 1, "neither"),
        ({"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": None}, 1, None),
    ],
)
def test_check_visible_devices(env, physical, problem):
    problems = check_visible_devices(env, physical)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_verdicts_name_the_missing_package():
    amd = [{"vendor": "amd"}]
    v = {x.backend: x for x in backend_verdicts(["CPUExecutionProvider"], None, amd)}
    assert v["ONNX Runtime on MIGraphX"].status == "cpu-only"
    assert "onnxruntime-migraphx is not installed" in v["ONNX Runtime on MIGraphX"].detail
    v = {x.backend: x for x in backend_verdicts(["MIGraphXExecutionProvider", "CPUExecutionProvider"], None, amd)}
    assert v["ONNX Runtime on MIGraphX"].status == "ready"
    v = {x.backend: x for x in backend_verdicts(["ROCMExecutionProvider", "CPUExecutionProvider"], None, amd)}
    assert "removed from ONNX Runtime 1.23" in v["ONNX Runtime on ROCm"].detail
    nv = {
        x.backend: x
        for x in backend_verdicts(
            ["CPUExecutionProvider"], {"gpu_available": False, "build": "CPU-only", "hip": None}, [{"vendor": "nvidia"}]
        )
    }
    assert nv["ONNX Runtime on CUDA"].detail == "onnxruntime-gpu is not installed"
    assert nv["PyTorch"].status == "cpu-only"


def test_providers_for_rocm_prefers_migraphx():
    from campusguard.backends.onnxruntime_backend import providers_for

    p = providers_for(
        DeviceSpec("rocm", 1), ["MIGraphXExecutionProvider", "ROCMExecutionProvider", "CPUExecutionProvider"]
    )
    assert p[0] == ("MIGraphXExecutionProvider", {"device_id": 1})
    p = providers_for(DeviceSpec("rocm", 0), ["ROCMExecutionProvider", "CPUExecutionProvider"])
    assert p[0][0] == "ROCMExecutionProvider"
    with pytest.raises(DeviceError, match="onnxruntime-migraphx"):
        providers_for(DeviceSpec("rocm", 0), ["CPUExecutionProvider"])
    p = providers_for(
        DeviceSpec("cuda", 0),
        ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
        tensorrt=True,
    )
    assert [x[0] if isinstance(x, tuple) else x for x in p] == [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
