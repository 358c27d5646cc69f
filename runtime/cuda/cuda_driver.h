// The CUDA driver API as swz_cuda uses it, without cuda.h and without linking libcuda:
// the few types, enumerators and constants are declared here with the values of the CUDA
// toolkit's cuda.h (CUDA 13.0; these values have not changed since CUDA 5), and
// libcuda.so.1 is opened with dlopen at run time and every entry point of
// cuda_symbols.h fetched with dlsym. Private to runtime/cuda (and its tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace swz::cuda {

// Types (cuda.h: "typedef enum cudaError_enum CUresult", "typedef int CUdevice",
// "typedef unsigned long long CUdeviceptr_v2" on 64-bit hosts, opaque handles).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUjit_option = int;
using CUjitInputType = int;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUlinkState_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
struct CUkern_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUlinkState = CUlinkState_st*;
using CUgraph = CUgraph_st*;
using CUgraphNode = CUgraphNode_st*;
using CUgraphExec = CUgraphExec_st*;
using CUkernel = CUkern_st*;

/// cuda.h's CUDA_KERNEL_NODE_PARAMS (CUDA_KERNEL_NODE_PARAMS_v2, the layout the _v2 graph
/// entry points take since CUDA 12.0).
struct CUDA_KERNEL_NODE_PARAMS {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;  ///< unused (func is set)
  CUcontext ctx;  ///< unused (func is set)
};

// CUresult values (enum cudaError_enum).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;

// CUdevice_attribute values.
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute values.
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// CUjit_option and CUjitInputType values.
inline constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr CUjit_option CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
inline constexpr CUjit_option CU_JIT_LOG_VERBOSE = 12;
inline constexpr CUjitInputType CU_JIT_INPUT_PTX = 1;

// cuStreamCreate flags (CUstream_flags).
inline constexpr unsigned int CU_STREAM_NON_BLOCKING = 0x1;

}  // namespace swz::cuda

#include "cuda/cuda_symbols.h"

namespace swz::cuda {

/// The driver's entry points (one member per cuda_symbols.h entry, named as in the CUDA
/// documentation), loaded from one shared library. Never unloaded: the driver keeps
/// threads of its own, and unloading it under them is a known way to crash at exit.
struct Driver {
#define SWZ_CU_MEMBER(api, symbol, params) CUresult (*api) params = nullptr;
  SWZ_CUDA_SYMBOLS(SWZ_CU_MEMBER)
  SWZ_CUDA_GRAPH_SYMBOLS(SWZ_CU_MEMBER)
#undef SWZ_CU_MEMBER

  /// Whether the driver has every SWZ_CUDA_GRAPH_SYMBOLS entry (CUDA 12.0+ drivers).
  bool has_graphs() const {
    bool all = true;
#define SWZ_CU_HAS(api, symbol, params) all = all && api != nullptr;
    SWZ_CUDA_GRAPH_SYMBOLS(SWZ_CU_HAS)
#undef SWZ_CU_HAS
    return all;
  }

  /// Opens `library` ("libcuda.so.1"; a path in tests) and fetches every entry point.
  /// Throws backend::Error: "cuda: libcuda.so.1 not found (no NVIDIA driver): ..." when
  /// dlopen fails, "cuda: libcuda.so.1 has no cuLinkCreate_v2 ..." when a symbol of
  /// SWZ_CUDA_SYMBOLS is missing (those of SWZ_CUDA_GRAPH_SYMBOLS may be: null then).
  static std::unique_ptr<Driver> load(const std::string& library = "libcuda.so.1");

  /// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a CUresult (cuGetErrorName/String).
  std::string describe(CUresult r) const;
  /// Throws backend::Error("cuda: <what>: <describe(r)>") unless r == CUDA_SUCCESS.
  void check(CUresult r, const char* what) const {
    if (r != CUDA_SUCCESS) fail(r, what);
  }
  [[noreturn]] void fail(CUresult r, const std::string& what) const;
};

/// The (api, exported symbol) pairs of cuda_symbols.h (both lists), for tests.
std::vector<std::pair<const char*, const char*>> symbol_names();

}  // namespace swz::cuda
