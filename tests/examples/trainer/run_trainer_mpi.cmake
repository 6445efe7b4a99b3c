# cavs-train under mpirun, scenarios that end in an error on some rank, so that mpirun runs with
# `--mca orte_abort_on_non_zero_status 0` (`--enable-recovery` for peer_killed: the others must
# report on their own, not be killed) and each rank's output is checked here.
#   cmake -DMPIEXEC=<mpiexec> -DNP=<n> -DSCENARIO=mismatch|settings|peer_exit|peer_killed
#         -DTRAIN=<cavs-train> -DDRIVER=<trainer_mpi_driver> -DWORK_DIR=<dir> -P run_trainer_mpi.cmake
#
# mismatch:  rank 0 asks for --strategy=ps, the others for allreduce: every rank must exit with
#            the same "ranks disagree" error naming a parameter, well within the timeout.
# settings:  rank 0 asks for --epochs=1, the others for 2: every rank must fail before step 1
#            naming --epochs (rank 0 used to finish and exit 0, the others to time out).
# peer_exit: the last rank exits after step 6 (epoch 2); the others must fail with a clear error
#            within --comm-timeout; then the epoch-1 checkpoint resumes at the same world size
#            and is refused by a single process.
# peer_killed: the last rank is killed by SIGKILL after step 6, under the launch line that
#            docs/distributed.md recommends, `mpirun --enable-recovery`: the others must report
#            within --comm-timeout and mpirun must exit (with orte_abort_on_non_zero_status 0 it
#            never does after a signal).
set(mpirun ${MPIEXEC} --oversubscribe --allow-run-as-root --mca orte_abort_on_non_zero_status 0)
set(common --max-train=40 --max-dev=20 --hidden=8 --embed=8 --batch=10 --quiet)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
math(EXPR last "${NP} - 1")

function(run_checked)
  string(TIMESTAMP start "%s")
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                  TIMEOUT 60)
  string(TIMESTAMP stop "%s")
  math(EXPR seconds "${stop} - ${start}")
  message("--- ${seconds} s, status ${rc}: ${ARGN}\n${out}${err}")
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
  set(rc "${rc}" PARENT_SCOPE)
  set(seconds "${seconds}" PARENT_SCOPE)
endfunction()

if(SCENARIO STREQUAL "mismatch")
  math(EXPR others "${NP} - 1")
  run_checked(${mpirun} -np 1 ${TRAIN} ${common} --epochs=1 --comm-timeout=20 --strategy=ps :
              -np ${others} ${TRAIN} ${common} --epochs=1 --comm-timeout=20 --strategy=allreduce)
  foreach(rank RANGE 0 ${last})
    if(NOT err MATCHES "cavs-train: rank ${rank}: error: ranks disagree on the model or the strategy: strategy for parameter '[^']+': rank 0 has 'ps")
      message(FATAL_ERROR "rank ${rank} did not report the mismatch")
    endif()
  endforeach()
  if(out MATCHES "SUMMARY" OR seconds GREATER 15)
    message(FATAL_ERROR "a rank trained, or the error took ${seconds} s (timeout 20 s)")
  endif()
elseif(SCENARIO STREQUAL "settings")
  math(EXPR others "${NP} - 1")
  run_checked(${mpirun} -np 1 ${TRAIN} ${common} --epochs=1 --comm-timeout=20 :
              -np ${others} ${TRAIN} ${common} --epochs=2 --comm-timeout=20)
  foreach(rank RANGE 0 ${last})
    if(NOT err MATCHES "cavs-train: rank ${rank}: error: ranks disagree on --epochs: rank 1 differs from rank 0")
      message(FATAL_ERROR "rank ${rank} did not report the mismatch")
    endif()
  endforeach()
  # (mpirun's own status says nothing here: with orte_abort_on_non_zero_status 0 it is 0.)
  if(out MATCHES "SUMMARY" OR seconds GREATER 15)
    message(FATAL_ERROR "a rank trained, or the error took ${seconds} s (timeout 20 s)")
  endif()
elseif(SCENARIO STREQUAL "peer_exit")
  set(ckpt ${WORK_DIR}/ckpt)
  run_checked(${mpirun} -np ${NP} ${DRIVER} --exit-rank=${last} --exit-after-step=6 ${common}
              --epochs=3 --comm-timeout=2 --checkpoint-dir=${ckpt} --trace=${WORK_DIR}/run.json)
  if(NOT out MATCHES "rank ${last} exits after step 6")
    message(FATAL_ERROR "rank ${last} did not exit as planned")
  endif()
  math(EXPR survivors "${NP} - 2")
  foreach(rank RANGE 0 ${survivors})
    if(NOT out MATCHES "trainer-mpi-driver: rank ${rank} error: step 7: [^\n]*(made no progress|mpi)[^\n]*resumes with --resume")
      message(FATAL_ERROR "rank ${rank} did not report the dead peer")
    endif()
    if(NOT EXISTS ${WORK_DIR}/run.json.rank${rank}.json)
      message(FATAL_ERROR "rank ${rank} wrote no trace after the failure")
    endif()
  endforeach()
  if(out MATCHES "rank [0-9]+ ok" OR seconds GREATER 20)
    message(FATAL_ERROR "a rank finished, or the survivors took ${seconds} s (timeout 2 s)")
  endif()
  if(NOT EXISTS ${ckpt}/ckpt-1.cavs OR EXISTS ${ckpt}/ckpt-2.cavs)
    message(FATAL_ERROR "expected ckpt-1.cavs and no ckpt-2.cavs in ${ckpt}")
  endif()
  # The last checkpoint loads: resume at the same world size and finish.
  run_checked(${mpirun} -np ${NP} ${TRAIN} ${common} --epochs=3 --checkpoint-dir=${ckpt} --resume)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "resumed from [^\n]*ckpt-1.cavs \\(epoch 1, step 4\\)"
     OR NOT out MATCHES "epoch 3/3" OR NOT out MATCHES "SUMMARY")
    message(FATAL_ERROR "the resume at ${NP} ranks failed")
  endif()
  # ... and is refused by another world size.
  run_checked(${TRAIN} ${common} --epochs=4 --checkpoint-dir=${ckpt} --resume)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "written by a run of ${NP} rank\\(s\\), this run has 1")
    message(FATAL_ERROR "a single process did not refuse the ${NP}-rank checkpoint")
  endif()
elseif(SCENARIO STREQUAL "peer_killed")
  run_checked(${MPIEXEC} --oversubscribe --allow-run-as-root --enable-recovery -np ${NP} ${DRIVER}
              --exit-rank=${last} --exit-after-step=6 --exit-by-sigkill ${common} --epochs=3
              --comm-timeout=2)
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "mpirun did not exit after a rank was killed: ${rc}")
  endif()
  if(NOT out MATCHES "rank ${last} exits after step 6")
    message(FATAL_ERROR "rank ${last} was not killed as planned")
  endif()
  math(EXPR survivors "${NP} - 2")
  foreach(rank RANGE 0 ${survivors})
    if(NOT out MATCHES "trainer-mpi-driver: rank ${rank} error: step 7: [^\n]*(made no progress|mpi)")
      message(FATAL_ERROR "rank ${rank} did not report the killed peer")
    endif()
  endforeach()
  if(out MATCHES "rank [0-9]+ ok" OR seconds GREATER 30)
    message(FATAL_ERROR "a rank finished, or mpirun took ${seconds} s (timeout 2 s)")
  endif()
else()
  message(FATAL_ERROR "unknown SCENARIO ${SCENARIO}")
endif()
