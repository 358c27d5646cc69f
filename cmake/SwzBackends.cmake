# Backend registration (runtime/backend/README.md, "Adding a backend").
#
#   swz_register_backend(LIBRARY <library target> ENTRY <C++ name of its BackendEntry>)
#
# A backend folder under runtime/ calls this from its CMakeLists.txt (at the start of a
# line); runtime/CMakeLists.txt adds every folder that does, and runtime/backend generates
# the table create_backend() searches from what was registered. So a new backend is its
# folder alone: no list elsewhere names it.
function(swz_register_backend)
  cmake_parse_arguments(A "" "LIBRARY;ENTRY" "" ${ARGN})
  if(NOT A_LIBRARY OR NOT A_ENTRY)
    message(FATAL_ERROR "swz_register_backend: LIBRARY and ENTRY are required")
  endif()
  set_property(GLOBAL APPEND PROPERTY SWZ_BACKEND_LIBRARIES ${A_LIBRARY})
  set_property(GLOBAL APPEND PROPERTY SWZ_BACKEND_ENTRIES ${A_ENTRY})
endfunction()
