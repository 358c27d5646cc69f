// The CUDA driver entry points swz_cuda calls, as an X-macro list (IREE's
// cuda_dynamic_symbol_tables.h style): X(api, "exported symbol", (parameter types)).
// Every function returns CUresult.
//
// `api` is the name the CUDA documentation uses; the exported symbol is what dlsym must
// ask for: cuda.h renames many functions to a versioned symbol with a #define
// (`#define cuMemAlloc cuMemAlloc_v2`), and the unversioned export is the old, 32-bit ABI.
// test/unit/backend/cuda_symbols_test.cpp checks every pair against cuda.h's #defines
// and against the exports of the CUDA toolkit's stub libcuda.so.
//
// This header holds the lists only, so that a file including cuda.h can include it too.
#pragma once

#define SWZ_CUDA_SYMBOLS(X)                                                                       \
  X(cuGetErrorName, "cuGetErrorName", (CUresult, const char**))                                   \
  X(cuGetErrorString, "cuGetErrorString", (CUresult, const char**))                               \
  X(cuInit, "cuInit", (unsigned int))                                                             \
  X(cuDriverGetVersion, "cuDriverGetVersion", (int*))                                             \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int*))                                                 \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice*, int))                                                 \
  X(cuDeviceGetName, "cuDeviceGetName", (char*, int, CUdevice))                                   \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int*, CUdevice_attribute, CUdevice))           \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t*, CUdevice))                                 \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext*, CUdevice))                 \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                        \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                              \
  X(cuStreamCreate, "cuStreamCreate", (CUstream*, unsigned int))                                  \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                       \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr*, size_t))                                          \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                     \
  X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t*, size_t*))                                          \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void*, size_t, CUstream))     \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void*, CUdeviceptr, size_t, CUstream))           \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, size_t, CUstream))     \
  X(cuMemsetD32Async, "cuMemsetD32Async", (CUdeviceptr, unsigned int, size_t, CUstream))          \
  X(cuLinkCreate, "cuLinkCreate_v2", (unsigned int, CUjit_option*, void**, CUlinkState*))         \
  X(cuLinkAddData, "cuLinkAddData_v2",                                                            \
    (CUlinkState, CUjitInputType, void*, size_t, const char*, unsigned int, CUjit_option*, void**)) \
  X(cuLinkComplete, "cuLinkComplete", (CUlinkState, void**, size_t*))                             \
  X(cuLinkDestroy, "cuLinkDestroy", (CUlinkState))                                                \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule*, const void*))                               \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                 \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction*, CUmodule, const char*))             \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", (int*, CUfunction_attribute, CUfunction))          \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, CUfunction_attribute, int))            \
  X(cuLaunchKernel, "cuLaunchKernel",                                                             \
    (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,            \
     unsigned int, unsigned int, CUstream, void**, void**))

// Launch graphs (CUDA graphs): optional. The _v2 kernel-node entry points exist from the
// CUDA 12.0 driver on; a driver without them still runs everything, launch graphs then
// replay their launches one by one (backend.h's default).
#define SWZ_CUDA_GRAPH_SYMBOLS(X)                                                                 \
  X(cuGraphCreate, "cuGraphCreate", (CUgraph*, unsigned int))                                     \
  X(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2",                                              \
    (CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*))           \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec*, CUgraph, unsigned long long)) \
  X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2",                          \
    (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*))                                   \
  X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                      \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                      \
  X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))
