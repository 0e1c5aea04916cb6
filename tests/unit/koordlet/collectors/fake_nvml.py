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

For the device inventory (pynvml 13.615.71 too): ``nvmlDeviceGetPciInfo`` returns an
nvmlPciInfo_t, a _PrintableStructure whose char arrays read back as str (``busIdLegacy``
"0000:3B:00.0", ``busId`` "00000000:3B:00.0": NVML's upper-case hex), ``nvmlDeviceGetNumaNodeId``
an int (NVMLError_NotSupported where the driver has no answer), ``nvmlDeviceGetHandleByPciBusId``
the device's handle (NVMLError_NotFound for an unknown id), ``nvmlSystemGetDriverVersion`` a
str; events: ``nvmlEventSetCreate`` an opaque c_nvmlEventSet_t, ``nvmlDeviceRegisterEvents``
(NVMLError_NotSupported where ``FakeGPU.events_supported`` is False), ``nvmlEventSetWait`` a
c_nvmlEventData_t for the next event of a registered device (only events raised after the
registration reach a set) or NVMLError_Timeout, ``nvmlEventSetFree``.

Tests make a device fail a given call with ``FakeGPU.errors[function name] = code`` and raise
an Xid event with ``FakeNVML.xid(index, code)``.
"""

from __future__ import annotations

import string
from ctypes import POINTER, Structure, c_char, c_int, c_uint, c_ulonglong, c_void_p, cast
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
NVML_ERROR_TIMEOUT = 10
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
        NVML_ERROR_TIMEOUT: "Timeout",
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
NVMLError_Timeout = _CLASSES["NVML_ERROR_TIMEOUT"]
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


class struct_c_nvmlEventSet_t(Structure):
    pass  # opaque handle


c_nvmlEventSet_t = POINTER(struct_c_nvmlEventSet_t)

nvmlEventTypeXidCriticalError = 0x0000000000000008
NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16


class _PrintableStructure(Structure):
    """pynvml's base for its structures: char arrays read back as str."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        return value.decode() if isinstance(value, bytes) else value


class nvmlPciInfo_t(_PrintableStructure):
    _fields_ = [
        ("busIdLegacy", c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
    ]


class c_nvmlEventData_t(_PrintableStructure):
    _fields_ = [
        ("device", c_nvmlDevice_t),
        ("eventType", c_ulonglong),
        ("eventData", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


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
    bus_id: str = ""  # sysfs form, "0000:3b:00.0"; "" → 0000:<0x3b + index>:00.0
    numa_node: int | None = None  # what nvmlDeviceGetNumaNodeId says; None: NotSupported
    events_supported: bool = True  # False: nvmlDeviceRegisterEvents says NotSupported


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
    NVMLError_Timeout = NVMLError_Timeout

    def __init__(
        self, gpus: list[FakeGPU], *, init_error: int | None = None, driver: str = "570.124.06"
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error  # e.g. NVML_ERROR_LIBRARY_NOT_FOUND: no libnvidia-ml.so.1
        self.driver = driver
        self.refcount = 0
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        # event set address → (registered GPU indexes, pending (index, type, data) events)
        self.event_sets: dict[int, tuple[set[int], list[tuple[int, int, int]]]] = {}

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

    # -- PCI and topology -----------------------------------------------------------------
    def _bus_id(self, index: int) -> str:
        return self.gpus[index].bus_id or f"0000:{0x3B + index:02x}:00.0"

    def nvmlDeviceGetPciInfo(self, handle: Any) -> nvmlPciInfo_t:
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        legacy = self._bus_id(self.gpus.index(gpu)).upper()
        domain, bus, rest = legacy.split(":")
        info = nvmlPciInfo_t()
        info.busIdLegacy = legacy.encode()
        info.busId = f"0000{legacy}".encode()
        info.domain, info.bus = int(domain, 16), int(bus, 16)
        info.device = int(rest.split(".")[0], 16)
        info.pciDeviceId = 0x233510DE
        return info

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetNumaNodeId", handle)
        if gpu.numa_node is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return c_int(gpu.numa_node).value

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> Any:
        self.calls.append(("nvmlDeviceGetHandleByPciBusId", (pciBusId,)))
        self._check_init()
        wanted = pciBusId.lower()
        for index in range(len(self.gpus)):
            if self._bus_id(index) == wanted[-12:] and (
                len(wanted) == 12 or set(wanted[:-12]) <= {"0"}
            ):
                if "nvmlDeviceGetHandleByPciBusId" in self.gpus[index].errors:
                    raise NVMLError(self.gpus[index].errors["nvmlDeviceGetHandleByPciBusId"])
                return cast(c_void_p(index + 1), c_nvmlDevice_t)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check_init()
        return self.driver

    # -- events --------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> Any:
        self._check_init()
        address = 0x1000 + len(self.event_sets)
        self.event_sets[address] = (set(), [])
        return cast(c_void_p(address), c_nvmlEventSet_t)

    def _event_set(self, event_set: Any) -> tuple[set[int], list[tuple[int, int, int]]]:
        self._check_init()
        address = cast(event_set, c_void_p).value
        if address not in self.event_sets:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self.event_sets[address]

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        gpu = self._gpu("nvmlDeviceRegisterEvents", handle, eventTypes)
        registered, _ = self._event_set(eventSet)
        if not gpu.events_supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        registered.add(self.gpus.index(gpu))

    def xid(self, index: int, code: int) -> None:
        """The driver reports Xid ``code`` on GPU ``index`` (to the sets it is registered in)."""
        for registered, pending in self.event_sets.values():
            if index in registered:
                pending.append((index, nvmlEventTypeXidCriticalError, code))

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> c_nvmlEventData_t:
        _, pending = self._event_set(eventSet)
        if not pending:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        index, kind, data = pending.pop(0)
        device = cast(c_void_p(index + 1), c_nvmlDevice_t)
        return c_nvmlEventData_t(device, kind, data, 0xFFFFFFFF, 0xFFFFFFFF)

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        self._event_set(eventSet)
        del self.event_sets[cast(eventSet, c_void_p).value or 0]
