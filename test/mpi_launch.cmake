# How the tests launch MPI jobs, computed once for test/mpi,
# test/cuda_emulator/{mpi,jobs}, test/hf and the command-line cases.
#
# SDP_MPIEXEC_OVERSUBSCRIBE: ranks share the machine's cores, and Open MPI
# refuses more ranks than cores without --oversubscribe (other launchers
# take no such flag, so it is empty for them).
# SDP_MPI_ENVIRONMENT: ctest's ENVIRONMENT for a job: containers run as
# root, which Open MPI refuses unless told twice; one OpenMP thread per rank.
# Under sanitizers, Open MPI's own allocations (MCA components it unloads at
# MPI_Finalize) read as leaks that no suppression can name; our code's leaks
# are checked by the single-process suite, and address and UB checks stay on.
set(SDP_MPIEXEC_OVERSUBSCRIBE)
set(SDP_MPI_ENVIRONMENT)
if(SDP_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
                  OUTPUT_VARIABLE _sdp_mpiexec_version ERROR_VARIABLE _sdp_mpiexec_version)
  if(_sdp_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(SDP_MPIEXEC_OVERSUBSCRIBE --oversubscribe)
  endif()
  set(SDP_MPI_ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
  if(SDP_SANITIZE)
    list(APPEND SDP_MPI_ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
endif()
