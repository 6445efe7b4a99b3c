# The CTest fixture around every test (tests/CMakeLists.txt): MODE=setup makes DIR, the TMPDIR of
# every test, empty; MODE=check, after the tests, fails naming whatever they left in DIR.
#   cmake -DMODE=setup|check -DDIR=<folder> -P tmpdir_check.cmake
if(MODE STREQUAL "setup")
  file(REMOVE_RECURSE "${DIR}")
  file(MAKE_DIRECTORY "${DIR}")
elseif(MODE STREQUAL "check")
  file(GLOB left LIST_DIRECTORIES true "${DIR}/*" "${DIR}/.*")
  if(left)
    list(LENGTH left count)
    string(REPLACE ";" "\n  " left "${left}")
    message(FATAL_ERROR "the tests left ${count} file(s) in their TMPDIR, ${DIR}:\n  ${left}\n"
                        "(a test that crashed, or one that does not clean up: use "
                        "tests/testing/temp_dir.h)")
  endif()
  message(STATUS "the tests left nothing in ${DIR}")
else()
  message(FATAL_ERROR "tmpdir_check.cmake: MODE must be setup or check, not '${MODE}'")
endif()
