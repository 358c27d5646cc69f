# cmake -DEXE=<binary> -DDEST=<dir> -P bundle_libs.cmake
# Copies the shared libraries EXE needs beyond glibc (libcrypto, libsodium, libxxhash,
# libpcre2) into DEST, so EXE (built with RPATH $ORIGIN/lib) runs on a machine without these
# Debian packages, e.g. the GPU host.
# Resolve against the system, not against a lib/ folder left by an earlier build.
file(REMOVE_RECURSE "${DEST}")
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${EXE}"
  RESOLVED_DEPENDENCIES_VAR deps
  UNRESOLVED_DEPENDENCIES_VAR missing
  PRE_EXCLUDE_REGEXES "^(linux-vdso|ld-linux).*"
  # glibc is the host's; so is libstdc++.so.6/libgcc_s.so.1 (should a library need them):
  # Debian 12's copies require glibc 2.36, the host's match its own glibc.
  POST_EXCLUDE_REGEXES ".*/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libstdc\\+\\+|libgcc_s)\\.so.*"
)
if(missing)
  message(FATAL_ERROR "unresolved runtime dependencies of ${EXE}: ${missing}")
endif()
file(MAKE_DIRECTORY "${DEST}")
foreach(d ${deps})
  get_filename_component(name "${d}" NAME)
  file(REAL_PATH "${d}" real)
  file(COPY_FILE "${real}" "${DEST}/${name}")
endforeach()
