# Runs distributed_mpi_peer_exit under mpirun and checks that every rank but the last (which
# exits with status 1 mid-collective) reported success. Open MPI is told not to abort the job
# on a non-zero exit status; that also makes mpirun's own status meaningless, hence this check.
#   cmake -DMPIEXEC=<mpiexec> -DNP=<n> -DBINARY=<test binary> -P run_peer_exit_test.cmake
execute_process(
  COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root
          --mca orte_abort_on_non_zero_status 0 -np ${NP} ${BINARY}
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  RESULT_VARIABLE rc
  TIMEOUT 80)
message("${out}")
math(EXPR last_survivor "${NP} - 2")
foreach(rank RANGE 0 ${last_survivor})
  if(NOT out MATCHES "cavs-peer-exit: rank ${rank} ok")
    message(FATAL_ERROR "rank ${rank} did not report success (mpirun: ${rc})\n${err}")
  endif()
endforeach()
if(out MATCHES "FAILED")
  message(FATAL_ERROR "a rank failed\n${err}")
endif()
