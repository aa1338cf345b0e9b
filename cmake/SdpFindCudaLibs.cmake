# Locates cuDNN and NCCL, which ship either inside the CUDA toolkit's layout
# (include/, lib64/), in system paths, or as Python wheels
# (site-packages/nvidia/{cudnn,nccl}/{include,lib}). SDP_CUDNN_ROOT and
# SDP_NCCL_ROOT override the search; so does SDP_PYTHON_NVIDIA_DIR.

set(_sdp_cuda_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR}/lib64
    ${CUDAToolkit_TARGET_DIR}/lib /usr/lib/x86_64-linux-gnu /usr/local/lib)
set(_sdp_cuda_include_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/include)

# Python-package layout: ask the first python3 on the PATH where nvidia/ is.
if(NOT SDP_PYTHON_NVIDIA_DIR)
  find_program(_sdp_python python3)
  if(_sdp_python)
    execute_process(
      COMMAND ${_sdp_python} -c "import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]) + '/nvidia')"
      OUTPUT_VARIABLE SDP_PYTHON_NVIDIA_DIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
endif()

function(sdp_find_cuda_lib prefix header library)
  set(roots ${${prefix}_ROOT})
  if(SDP_PYTHON_NVIDIA_DIR)
    list(APPEND roots ${SDP_PYTHON_NVIDIA_DIR}/${library})
  endif()
  find_path(${prefix}_INCLUDE_DIR ${header}
    HINTS ${roots} PATH_SUFFIXES include PATHS ${_sdp_cuda_include_hints})
  find_library(${prefix}_LIBRARY NAMES ${library} lib${library}.so.2 lib${library}.so.9
    HINTS ${roots} PATH_SUFFIXES lib lib64 PATHS ${_sdp_cuda_hints})
  if(${prefix}_INCLUDE_DIR AND ${prefix}_LIBRARY)
    set(${prefix}_FOUND ON PARENT_SCOPE)
    message(STATUS "sdp: ${library}: ${${prefix}_LIBRARY}")
  else()
    set(${prefix}_FOUND OFF PARENT_SCOPE)
    message(STATUS "sdp: ${library} not found (set ${prefix}_ROOT)")
  endif()
endfunction()

sdp_find_cuda_lib(SDP_CUDNN cudnn.h cudnn)
sdp_find_cuda_lib(SDP_NCCL nccl.h nccl)

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
