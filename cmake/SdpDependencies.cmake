# Finds what the engine links against. Host dependencies (OpenBLAS, OpenMP,
# nlohmann-json, CLI11, Catch2, MPI) come from Debian packages installed by
# scripts/install-deps.sh, or unpacked into a prefix named in
# CMAKE_PREFIX_PATH (bench/gpu/check.sh on a bare GPU machine). MPI and CUDA
# are optional: each part is built wherever its toolkit exists.

find_package(OpenMP REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(SDP_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${SDP_CLI11_INCLUDE})
endif()

# OpenBLAS: prefer the OpenMP build (it does not spawn its own threads inside
# our parallel regions); fall back to whichever libopenblas the system has.
# Debian keeps that build in lib/<arch>/openblas-openmp/ and its cblas.h in
# include/<arch>/openblas-openmp/, under /usr or under any CMAKE_PREFIX_PATH
# entry (a bare machine's unpacked packages: bench/gpu/check.sh). An explicit
# SDP_BLAS_LIBRARY (and SDP_CBLAS_INCLUDE) overrides the search.
set(_sdp_openblas_dirs)
foreach(prefix ${CMAKE_PREFIX_PATH} /usr)
  foreach(arch x86_64-linux-gnu aarch64-linux-gnu)
    list(APPEND _sdp_openblas_dirs ${prefix}/lib/${arch}/openblas-openmp)
  endforeach()
endforeach()
find_library(SDP_BLAS_LIBRARY NAMES openblas PATHS ${_sdp_openblas_dirs} NO_DEFAULT_PATH)
if(NOT SDP_BLAS_LIBRARY)
  find_library(SDP_BLAS_LIBRARY NAMES openblas REQUIRED)
endif()
get_filename_component(SDP_BLAS_DIR ${SDP_BLAS_LIBRARY} DIRECTORY)
# The header of the same installation first: lib/<arch>/openblas-openmp ->
# include/<arch>/openblas-openmp.
get_filename_component(_sdp_blas_flavour ${SDP_BLAS_DIR} NAME)
get_filename_component(_sdp_blas_arch_dir ${SDP_BLAS_DIR} DIRECTORY)
get_filename_component(_sdp_blas_arch ${_sdp_blas_arch_dir} NAME)
get_filename_component(_sdp_blas_prefix ${_sdp_blas_arch_dir}/../.. ABSOLUTE)
find_path(SDP_CBLAS_INCLUDE cblas.h
  HINTS ${_sdp_blas_prefix}/include/${_sdp_blas_arch}/${_sdp_blas_flavour}
  PATH_SUFFIXES openblas-openmp openblas x86_64-linux-gnu/openblas-openmp)
if(NOT SDP_CBLAS_INCLUDE)
  find_path(SDP_CBLAS_INCLUDE cblas.h REQUIRED)
endif()
add_library(sdp::blas INTERFACE IMPORTED)
target_link_libraries(sdp::blas INTERFACE ${SDP_BLAS_LIBRARY})
target_include_directories(sdp::blas INTERFACE ${SDP_CBLAS_INCLUDE})
# The library's directory goes into the rpath so the OpenMP build is the one
# loaded at run time, whatever Debian's alternatives point libopenblas.so.0 at.
set(CMAKE_BUILD_RPATH ${SDP_BLAS_DIR})
set(CMAKE_INSTALL_RPATH ${SDP_BLAS_DIR})
message(STATUS "sdp: BLAS = ${SDP_BLAS_LIBRARY} (cblas.h in ${SDP_CBLAS_INCLUDE})")

find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  set(SDP_HAVE_MPI ON)
  message(STATUS "sdp: MPI found (${MPI_CXX_LIBRARIES})")
else()
  set(SDP_HAVE_MPI OFF)
  message(STATUS "sdp: MPI not found: multi-rank runs and MPI tests are disabled")
endif()

set(SDP_HAVE_CUDA OFF)
set(SDP_CUDA_EMULATED OFF)
if(SDP_CUDA_EMULATION)
  # The emulated CUDA device (cuda_emulator/): every .cu file and the CUDA
  # host code compile with the host compiler against the real toolkit's
  # headers (for the types); the emulator's libraries stand in for libcudart,
  # cuBLAS(Lt), cuDNN and NCCL. No nvcc, no GPU.
  find_path(SDP_CUDA_INCLUDE_DIR cuda_runtime_api.h
    HINTS ${CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda
    PATH_SUFFIXES include targets/x86_64-linux/include targets/sbsa-linux/include)
  find_path(SDP_CUDNN_HEADER_DIR cudnn.h
    HINTS ${SDP_CUDNN_ROOT} ${SDP_CUDA_INCLUDE_DIR} /usr/local/cuda/include PATH_SUFFIXES include)
  find_path(SDP_NCCL_HEADER_DIR nccl.h
    HINTS ${SDP_NCCL_ROOT} ${SDP_CUDA_INCLUDE_DIR} /usr/local/cuda/include PATH_SUFFIXES include)
  foreach(header_dir SDP_CUDA_INCLUDE_DIR SDP_CUDNN_HEADER_DIR SDP_NCCL_HEADER_DIR)
    if(NOT ${header_dir})
      message(FATAL_ERROR "sdp: SDP_CUDA_EMULATION needs the CUDA toolkit's headers, cuDNN's and "
                          "NCCL's (${header_dir} not found; set CUDAToolkit_ROOT, SDP_CUDNN_ROOT "
                          "or SDP_NCCL_ROOT)")
    endif()
  endforeach()
  set(CUDAToolkit_INCLUDE_DIRS ${SDP_CUDA_INCLUDE_DIR} ${SDP_CUDNN_HEADER_DIR} ${SDP_NCCL_HEADER_DIR})
  list(REMOVE_DUPLICATES CUDAToolkit_INCLUDE_DIRS)
  find_package(Threads REQUIRED)
  set(SDP_HAVE_CUDA ON)
  set(SDP_CUDA_EMULATED ON)
  message(STATUS "sdp: emulated CUDA device: .cu files compile as C++ (headers: ${CUDAToolkit_INCLUDE_DIRS})")
elseif(SDP_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${SDP_CUDA_ARCHITECTURES})
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 support; nvcc 12+ accepts -std=c++20.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    include(SdpFindCudaLibs)
    set(SDP_HAVE_CUDA ON)
  endif()
endif()
if(SDP_CUDA_EMULATED)
elseif(SDP_HAVE_CUDA)
  message(STATUS "sdp: CUDA toolkit found: CUDA sources are compiled (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "sdp: no CUDA toolkit found: building the CPU-only engine")
endif()
