"""Label, annotation and resource names, identical to Koordinator's (apis/extension).

Existing Koordinator manifests keep working because these strings are the same.
"""

from __future__ import annotations

DOMAIN = "koordinator.sh"
SCHEDULING_DOMAIN = "scheduling.koordinator.sh"
NODE_DOMAIN = "node.koordinator.sh"

# -- pod labels ------------------------------------------------------------------------------
LABEL_QOS_CLASS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_PRIORITY = "koordinator.sh/priority"
LABEL_CORE_SCHED_GROUP_ID = "koordinator.sh/core-sched-group-id"
LABEL_CORE_SCHED_POLICY = "koordinator.sh/core-sched-policy"
LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"

# -- pod annotations -------------------------------------------------------------------------
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_CPU_QOS = "koordinator.sh/cpuQOS"
ANNOTATION_MEMORY_QOS = "koordinator.sh/memoryQOS"
ANNOTATION_BLKIO_QOS = "koordinator.sh/blkioQOS"
ANNOTATION_CPU_BURST = "koordinator.sh/cpuBurst"
ANNOTATION_NETWORK_QOS = "koordinator.sh/networkQOS"
ANNOTATION_RESCTRL = "node.koordinator.sh/resctrl"  # a pod annotation despite the prefix
ANNOTATION_OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
ANNOTATION_OOM_SCORE_ADJ_SPEC = "koordinator.sh/oom-score-adj-spec"
ANNOTATION_EVICTION_POLICY = "koordinator.sh/eviction-policy"
ANNOTATION_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"
ANNOTATION_DOCKER_TYPE = "io.kubernetes.docker.type"

# -- ClusterColocationProfile annotations ----------------------------------------------------
# present on a profile (any value): matched pods keep cpu/memory, no batch/mid conversion
ANNOTATION_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"

# -- node annotations and labels -------------------------------------------------------------
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
LABEL_CPU_NORMALIZATION_ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
ANNOTATION_NETWORK_BANDWIDTH = "node.koordinator.sh/network-bandwidth"
ANNOTATION_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_POD_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"

# -- extended resources ----------------------------------------------------------------------
BATCH_CPU = "kubernetes.io/batch-cpu"  # milli-cores
BATCH_MEMORY = "kubernetes.io/batch-memory"  # bytes
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
DEPRECATED_BATCH_CPU = "koordinator.sh/batch-cpu"
DEPRECATED_BATCH_MEMORY = "koordinator.sh/batch-memory"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU = "koordinator.sh/gpu"
GPU_SHARED = "koordinator.sh/gpu.shared"
RDMA = "koordinator.sh/rdma"
FPGA = "koordinator.sh/fpga"
NVIDIA_GPU = "nvidia.com/gpu"

# -- runtime ---------------------------------------------------------------------------------
GPU_ISOLATION_HAMI_CORE = "HAMi-core"
ENV_NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
ENV_CUDA_DEVICE_MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
ENV_CUDA_DEVICE_SM_LIMIT = "CUDA_DEVICE_SM_LIMIT"
ENV_LD_PRELOAD = "LD_PRELOAD"
RESCTRL_GROUP_PREFIX = "koordlet-"

# -- scheduler (koord-scheduler's LoadAwareScheduling and NodeNUMAResource) -------------------
ANNOTATION_CUSTOM_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"  # on a node
ANNOTATION_NODE_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"  # before amplification
LABEL_NODE_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
LABEL_NODE_NUMA_ALLOCATE_STRATEGY = "node.koordinator.sh/numa-allocate-strategy"
