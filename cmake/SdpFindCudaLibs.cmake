# Locates cuDNN and NCCL, which ship inside a CUDA toolkit's layout
# (include/, lib64/), in system paths (Debian: include/, lib/<arch>/), or as
# Python wheels (site-packages/nvidia/{cudnn,nccl}/{include,lib}). A wheel
# holds only the versioned library (libcudnn.so.9, libnccl.so.2); linking to
# it by full path is enough, its soname goes into the binary, and programs
# then run with that lib/ folder on LD_LIBRARY_PATH (cuDNN loads its engine
# libraries from there by name).
#
# Each candidate root is searched for the header and the library together, so
# that the two never come from different installations (a toolkit's nccl.h
# with a wheel's libnccl, say). Order: SDP_<LIB>_ROOT; SDP_PYTHON_NVIDIA_DIR
# when given on the command line; the CUDA toolkit; the system; the first
# python3's nvidia/ folder, found automatically. SDP_CUDNN_INCLUDE_DIR /
# SDP_CUDNN_LIBRARY (and the NCCL pair) set by hand skip the search.

set(_sdp_python_nvidia_given OFF)
if(SDP_PYTHON_NVIDIA_DIR)
  set(_sdp_python_nvidia_given ON)
else()
  # Where the first python3 on the PATH keeps nvidia/ (a namespace package:
  # its __path__ lists the folder).
  find_program(_sdp_python python3)
  if(_sdp_python)
    execute_process(
      COMMAND ${_sdp_python} -c "import nvidia; print(list(nvidia.__path__)[0])"
      OUTPUT_VARIABLE _sdp_python_nvidia_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
      RESULT_VARIABLE _sdp_python_status TIMEOUT 30)
    if(_sdp_python_status EQUAL 0 AND IS_DIRECTORY "${_sdp_python_nvidia_dir}")
      set(SDP_PYTHON_NVIDIA_DIR ${_sdp_python_nvidia_dir})
      message(STATUS "sdp: ${_sdp_python}'s NVIDIA wheels: ${SDP_PYTHON_NVIDIA_DIR}")
    endif()
  endif()
endif()

set(_sdp_toolkit_roots)
foreach(dir ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} ${CUDAToolkit_ROOT_DIR})
  if(IS_DIRECTORY "${dir}")
    list(APPEND _sdp_toolkit_roots ${dir})
  endif()
endforeach()
list(REMOVE_DUPLICATES _sdp_toolkit_roots)

set(_sdp_lib_suffixes lib64 lib lib/x86_64-linux-gnu lib/aarch64-linux-gnu
    targets/x86_64-linux/lib targets/sbsa-linux/lib)

# Sets <prefix>_INCLUDE_DIR, <prefix>_LIBRARY (cached) and <prefix>_FOUND.
# `wheel` is the folder under nvidia/ (cudnn, nccl); `soversion` the major
# version of the library file a wheel carries.
function(sdp_find_cuda_lib prefix header library wheel soversion)
  set(names ${library} lib${library}.so.${soversion})
  if(NOT (${prefix}_INCLUDE_DIR AND ${prefix}_LIBRARY))
    set(roots ${${prefix}_ROOT})
    if(SDP_PYTHON_NVIDIA_DIR AND _sdp_python_nvidia_given)
      list(APPEND roots ${SDP_PYTHON_NVIDIA_DIR}/${wheel})
    endif()
    list(APPEND roots ${_sdp_toolkit_roots} /usr /usr/local)
    if(SDP_PYTHON_NVIDIA_DIR AND NOT _sdp_python_nvidia_given)
      list(APPEND roots ${SDP_PYTHON_NVIDIA_DIR}/${wheel})
    endif()
    foreach(root ${roots})
      find_path(_sdp_include ${header} PATHS ${root} PATH_SUFFIXES include
                NO_DEFAULT_PATH NO_CACHE)
      find_library(_sdp_library NAMES ${names} PATHS ${root} PATH_SUFFIXES ${_sdp_lib_suffixes}
                   NO_DEFAULT_PATH NO_CACHE)
      if(_sdp_include AND _sdp_library)
        set(${prefix}_INCLUDE_DIR ${_sdp_include} CACHE PATH "${header}'s folder" FORCE)
        set(${prefix}_LIBRARY ${_sdp_library} CACHE FILEPATH "lib${library}" FORCE)
        break()
      endif()
      unset(_sdp_include)
      unset(_sdp_library)
    endforeach()
    # Last resort, for a wheel without headers: the header from one root and
    # the library from another (their versions may differ: said loudly).
    if(NOT ${prefix}_LIBRARY)
      find_path(_sdp_include ${header} PATHS ${roots} PATH_SUFFIXES include
                NO_DEFAULT_PATH NO_CACHE)
      find_library(_sdp_library NAMES ${names} PATHS ${roots} PATH_SUFFIXES ${_sdp_lib_suffixes}
                   NO_DEFAULT_PATH NO_CACHE)
      if(_sdp_include AND _sdp_library)
        message(WARNING "sdp: ${header} (${_sdp_include}) and ${_sdp_library} come from different "
                        "installations; their versions may differ")
        set(${prefix}_INCLUDE_DIR ${_sdp_include} CACHE PATH "${header}'s folder" FORCE)
        set(${prefix}_LIBRARY ${_sdp_library} CACHE FILEPATH "lib${library}" FORCE)
      endif()
    endif()
  endif()
  if(${prefix}_INCLUDE_DIR AND ${prefix}_LIBRARY)
    set(${prefix}_FOUND ON PARENT_SCOPE)
    message(STATUS "sdp: ${library}: ${${prefix}_LIBRARY} (headers in ${${prefix}_INCLUDE_DIR})")
  else()
    set(${prefix}_FOUND OFF PARENT_SCOPE)
    message(STATUS "sdp: ${library} not found (set ${prefix}_ROOT or SDP_PYTHON_NVIDIA_DIR)")
  endif()
endfunction()

sdp_find_cuda_lib(SDP_CUDNN cudnn.h cudnn cudnn 9)
sdp_find_cuda_lib(SDP_NCCL nccl.h nccl nccl 2)

if(SDP_CUDNN_FOUND AND NOT TARGET sdp::cudnn)
  add_library(sdp::cudnn INTERFACE IMPORTED)
  target_include_directories(sdp::cudnn INTERFACE ${SDP_CUDNN_INCLUDE_DIR})
  target_link_libraries(sdp::cudnn INTERFACE ${SDP_CUDNN_LIBRARY})
endif()
if(SDP_NCCL_FOUND AND NOT TARGET sdp::nccl)
  add_library(sdp::nccl INTERFACE IMPORTED)
  target_include_directories(sdp::nccl INTERFACE ${SDP_NCCL_INCLUDE_DIR})
  target_link_libraries(sdp::nccl INTERFACE ${SDP_NCCL_LIBRARY})
endif()
