"""A fake of the pynvml module (PyPI nvidia-ml-py 13.x) at its Python boundary.

What it keeps from the real module, read from nvidia-ml-py 13.615.71's pynvml.py:

* Errors: ``NVMLError(value)`` is an Exception whose ``__new__`` returns the subclass generated
  for that code (``NVMLError_NotFound``, ``NVMLError_GpuIsLost``, ...; the names are built with
  the same capwords rule), ``str()`` is NVML's text ("Not Found", "GPU is lost"), ``.value`` the
  code, and each subclass can be raised without arguments.
* Return types are the same ctypes structures: ``nvmlDeviceGetMemoryInfo`` a c_nvmlMemory_t
  (total, free, used: c_ulonglong), ``nvmlDeviceGetUtilizationRates`` a c_nvmlUtilization_t
  (gpu, memory: c_uint), ``nvmlDeviceGetProcessUtilization`` a slice of a
  c_nvmlProcessUtilizationSample_t array; ``nvmlDeviceGetComputeRunningProcesses`` returns
  nvmlFriendlyObject copies of c_nvmlProcessInfo_v2_t with ``usedGpuMemory`` None where NVML
  says "not available" (~0ULL); handles are opaque ``c_nvmlDevice_t`` pointers; strings are
  str (pynvml's convertStrBytes decodes them).
* Behaviour: nvmlInit and nvmlShutdown are reference counted and any device call outside an
  initialization raises NVMLError_Uninitialized; a failing library load raises
  NVMLError_LibraryNotFound from nvmlInit; nvmlDeviceGetProcessUtilization returns only samples
  newer than ``timeStamp`` (µs) and raises NVMLError_NotFound when there are none; a bad index
  raises NVMLError_InvalidArgument.

Tests make a device fail a given call with ``FakeGPU.errors[function name] = code``.
"""

from __future__ import annotations

import string
from ctypes import POINTER, Structure, c_uint, c_ulonglong, c_void_p, cast
from dataclasses import dataclass, field
from typing import Any, ClassVar

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

_ERROR_CODES = {
    name: value for name, value in dict(globals()).items() if name.startswith("NVML_ERROR_")
}

NVML_VALUE_NOT_AVAILABLE_ulonglong = c_ulonglong(-1)


class NVMLError(Exception):
    _valClassMapping: ClassVar[dict[int, type[NVMLError]]] = {}
    _errcode_to_string: ClassVar[dict[int, str]] = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }
    value: int

    def __new__(cls, value: int) -> NVMLError:
        typ = NVMLError._valClassMapping.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NVMLError) and self.value == other.value

    __hash__ = Exception.__hash__


def _error_class(err_name: str, value: int) -> type[NVMLError]:
    # pynvml's _extractNVMLErrorsAsClasses: NVML_ERROR_GPU_IS_LOST → NVMLError_GpuIsLost.
    suffix = string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")

    def new(typ: type[NVMLError], *args: object) -> NVMLError:
        return NVMLError.__new__(typ, value)

    cls = type(f"NVMLError_{suffix}", (NVMLError,), {"__new__": new})
    NVMLError._valClassMapping[value] = cls
    return cls


_CLASSES = {name: _error_class(name, value) for name, value in _ERROR_CODES.items()}
NVMLError_Uninitialized = _CLASSES["NVML_ERROR_UNINITIALIZED"]
NVMLError_InvalidArgument = _CLASSES["NVML_ERROR_INVALID_ARGUMENT"]
NVMLError_NotSupported = _CLASSES["NVML_ERROR_NOT_SUPPORTED"]
NVMLError_NotFound = _CLASSES["NVML_ERROR_NOT_FOUND"]
NVMLError_DriverNotLoaded = _CLASSES["NVML_ERROR_DRIVER_NOT_LOADED"]
NVMLError_LibraryNotFound = _CLASSES["NVML_ERROR_LIBRARY_NOT_FOUND"]
NVMLError_GpuIsLost = _CLASSES["NVML_ERROR_GPU_IS_LOST"]


class c_nvmlMemory_t(Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlUtilization_t(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class c_nvmlProcessInfo_v2_t(Structure):
    _fields_ = [
        ("pid", c_uint),
        ("usedGpuMemory", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


class c_nvmlProcessUtilizationSample_t(Structure):
    _fields_ = [
        ("pid", c_uint),
        ("timeStamp", c_ulonglong),
        ("smUtil", c_uint),
        ("memUtil", c_uint),
        ("encUtil", c_uint),
        ("decUtil", c_uint),
    ]


class struct_c_nvmlDevice_t(Structure):
    pass  # opaque handle


c_nvmlDevice_t = POINTER(struct_c_nvmlDevice_t)


class nvmlFriendlyObject:
    def __init__(self, dictionary: dict[str, Any]) -> None:
        for key, value in dictionary.items():
            setattr(self, key, value)


def nvmlStructToFriendlyObject(struct: Structure) -> nvmlFriendlyObject:
    fields: list[tuple[str, Any]] = struct._fields_  # type: ignore[assignment]
    return nvmlFriendlyObject({name: getattr(struct, name) for name, *_ in fields})


@dataclass
class FakeGPU:
    minor: int
    uuid: str
    name: str = "NVIDIA H200"
    total: int = 144 << 30
    used: int = 0
    gpu_util: int = 0
    # (pid, used GPU memory in bytes, or None for NVML's "not available")
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    # (pid, CPU timestamp in µs, SM percent)
    samples: list[tuple[int, int, int]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # pynvml function name → error code


class FakeNVML:
    """The pynvml functions the collector calls, over a list of FakeGPU (index = position)."""

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    def __init__(self, gpus: list[FakeGPU], *, init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error  # e.g. NVML_ERROR_LIBRARY_NOT_FOUND: no libnvidia-ml.so.1
        self.refcount = 0
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    # -- library -------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append(("nvmlInit", ()))
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.refcount += 1

    def nvmlShutdown(self) -> None:
        self.calls.append(("nvmlShutdown", ()))
        self._check_init()
        self.refcount -= 1

    def _check_init(self) -> None:
        if self.refcount <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, function: str, handle: Any, *args: object) -> FakeGPU:
        self.calls.append((function, (handle, *args)))
        self._check_init()
        address = cast(handle, c_void_p).value
        if not address or address > len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[address - 1]
        if function in gpu.errors:
            raise NVMLError(gpu.errors[function])
        return gpu

    # -- devices -------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._check_init()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if "nvmlDeviceGetHandleByIndex" in self.gpus[index].errors:
            raise NVMLError(self.gpus[index].errors["nvmlDeviceGetHandleByIndex"])
        return cast(c_void_p(index + 1), c_nvmlDevice_t)  # an opaque, non-null pointer

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return c_uint(self._gpu("nvmlDeviceGetMinorNumber", handle).minor).value

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> c_nvmlMemory_t:
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        return c_nvmlMemory_t(gpu.total, gpu.total - gpu.used, gpu.used)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> c_nvmlUtilization_t:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        return c_nvmlUtilization_t(gpu.gpu_util, 0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        gpu = self._gpu("nvmlDeviceGetComputeRunningProcesses", handle)
        procs = []
        for pid, used in gpu.processes:
            raw = NVML_VALUE_NOT_AVAILABLE_ulonglong.value if used is None else used
            obj = nvmlStructToFriendlyObject(c_nvmlProcessInfo_v2_t(pid, raw, 0xFFFFFFFF, 0))
            if obj.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ulonglong.value:  # type: ignore[attr-defined]
                obj.usedGpuMemory = None  # type: ignore[attr-defined]
            procs.append(obj)
        return procs

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[Any]:
        gpu = self._gpu("nvmlDeviceGetProcessUtilization", handle, timeStamp)
        newer = [s for s in gpu.samples if s[1] > timeStamp]
        if not newer:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        array = (c_nvmlProcessUtilizationSample_t * len(newer))()
        for i, (pid, ts, sm) in enumerate(newer):
            array[i] = c_nvmlProcessUtilizationSample_t(pid, ts, sm, 0, 0, 0)
        return array[0 : len(newer)]
