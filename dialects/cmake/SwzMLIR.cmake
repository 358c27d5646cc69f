# Finds Debian's MLIR 19 (libmlir-19-dev) once per including directory and exposes
# mlir_tablegen() plus the include directories. We link the single shared library `MLIR`
# (libMLIR.so) and `LLVM` (libLLVM.so): linking two dylibs is seconds, linking dozens of
# static MLIR archives is minutes on the 2-core CI machine.
if(NOT MLIR_FOUND)
  if(NOT MLIR_DIR AND EXISTS /usr/lib/llvm-19/lib/cmake/mlir)
    set(MLIR_DIR /usr/lib/llvm-19/lib/cmake/mlir)
  endif()
  find_package(MLIR REQUIRED CONFIG)
endif()
if(NOT TARGET MLIR)
  # Imported targets are directory-scoped: re-import in sibling directories.
  find_package(MLIR REQUIRED CONFIG)
endif()
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
set(SWZ_MLIR_INCLUDE_DIRS ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
set(SWZ_MLIR_LIBS MLIR LLVM)
# LLVM's headers trigger these under -Wextra; keep our own warnings readable.
set(SWZ_MLIR_COMPILE_OPTIONS -Wno-unused-parameter -Wno-deprecated-declarations)
