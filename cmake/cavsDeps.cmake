# cavsDeps.cmake: finders for the libraries that have no usable CMake package of their own on
# Debian, each wrapped as an imported target in the `cavs_deps::` namespace.
#
# Used twice: by the root CMakeLists.txt while building cavs, and by the installed
# cavsConfig.cmake so that a project calling find_package(cavs) gets the same targets that the
# exported cavs:: libraries link. Every function is idempotent (a second call is a no-op) and sets
# CAVS_<NAME>_FOUND plus CAVS_<NAME>_WHY, a one-line reason for the configure summary.
#
#   cavs_find_openblas()  -> cavs_deps::openblas  (libopenblas + the directory holding its cblas.h)
#   cavs_find_cudnn()     -> cavs_deps::cudnn     (libcudnn + cudnn.h; call after CUDAToolkit)
#   cavs_find_nccl()      -> cavs_deps::nccl      (libnccl + nccl.h; call after CUDAToolkit)
#
# CAVS_OPENBLAS_LIBRARY_HINTS / CAVS_OPENBLAS_INCLUDE_HINTS, where set, are searched first.
include_guard(GLOBAL)

# Search roots for the CUDA-side libraries: the toolkit CMake found, then the usual install path.
function(_cavs_cuda_search_roots out_var)
  set(roots "")
  foreach(dir IN ITEMS "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_LIBRARY_ROOT}"
                       "${CUDAToolkit_TARGET_DIR}" "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}"
                       "/usr/local/cuda")
    if(dir)
      list(APPEND roots "${dir}")
    endif()
  endforeach()
  set(${out_var} "${roots}" PARENT_SCOPE)
endfunction()

# _cavs_import_library(<target> <library> <include_dir>): an UNKNOWN IMPORTED target.
function(_cavs_import_library target library include_dir)
  if(TARGET ${target})
    return()
  endif()
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${library}"
    INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
endfunction()

# OpenBLAS. Debian ships one build per threading model, each with its own cblas.h, under
# <multiarch>/openblas-{pthread,openmp,serial}/; the plain /usr/lib/<multiarch>/libopenblas.so is
# an alternatives link to one of them. The header must come from OpenBLAS (not the netlib
# cblas.h of libblas-dev), so the OpenBLAS-specific directories are searched before the generic.
function(cavs_find_openblas)
  if(TARGET cavs_deps::openblas)
    set(CAVS_OPENBLAS_FOUND TRUE PARENT_SCOPE)
    return()
  endif()
  # OpenBLAS' own config file, where present, gives exact hints.
  find_package(OpenBLAS CONFIG QUIET)
  set(lib_hints "")
  foreach(lib IN LISTS OpenBLAS_LIBRARIES)
    get_filename_component(dir "${lib}" DIRECTORY)
    list(APPEND lib_hints "${dir}")
  endforeach()
  if(CMAKE_LIBRARY_ARCHITECTURE)
    set(multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
  else()
    set(multiarch "x86_64-linux-gnu")
  endif()
  set(suffixes openblas-pthread openblas-openmp openblas-serial openblas
               ${multiarch}/openblas-pthread ${multiarch}/openblas-openmp
               ${multiarch}/openblas-serial)
  find_library(CAVS_OPENBLAS_LIBRARY NAMES openblas openblasp openblas64
    HINTS ${CAVS_OPENBLAS_LIBRARY_HINTS} ${lib_hints} $ENV{OPENBLAS_HOME}/lib
    PATH_SUFFIXES ${suffixes}
    DOC "OpenBLAS library used for CPU GEMM")
  find_path(CAVS_OPENBLAS_INCLUDE_DIR NAMES cblas.h
    HINTS ${CAVS_OPENBLAS_INCLUDE_HINTS} ${OpenBLAS_INCLUDE_DIRS} $ENV{OPENBLAS_HOME}/include
          /usr/include/${multiarch}/openblas-pthread /usr/include/${multiarch}/openblas-openmp
          /usr/include/${multiarch}/openblas-serial
    PATH_SUFFIXES ${suffixes}
    DOC "Directory holding OpenBLAS' cblas.h")
  if(CAVS_OPENBLAS_LIBRARY AND CAVS_OPENBLAS_INCLUDE_DIR)
    _cavs_import_library(cavs_deps::openblas "${CAVS_OPENBLAS_LIBRARY}"
                         "${CAVS_OPENBLAS_INCLUDE_DIR}")
    set(CAVS_OPENBLAS_FOUND TRUE PARENT_SCOPE)
    set(CAVS_OPENBLAS_WHY "${CAVS_OPENBLAS_LIBRARY}, cblas.h in ${CAVS_OPENBLAS_INCLUDE_DIR}"
        PARENT_SCOPE)
  else()
    set(CAVS_OPENBLAS_FOUND FALSE PARENT_SCOPE)
    set(CAVS_OPENBLAS_WHY
        "not found (library: ${CAVS_OPENBLAS_LIBRARY}, cblas.h: ${CAVS_OPENBLAS_INCLUDE_DIR}); \
install libopenblas-dev" PARENT_SCOPE)
  endif()
endfunction()

# _cavs_find_cuda_library(<NAME> <libname> <header> <target>): shared body of cuDNN and NCCL.
macro(_cavs_find_cuda_library NAME libname header target)
  if(TARGET ${target})
    set(CAVS_${NAME}_FOUND TRUE PARENT_SCOPE)
    return()
  endif()
  _cavs_cuda_search_roots(_cavs_roots)
  find_library(CAVS_${NAME}_LIBRARY NAMES ${libname}
    HINTS ${_cavs_roots}
    PATH_SUFFIXES lib64 lib lib/x64 targets/x86_64-linux/lib)
  find_path(CAVS_${NAME}_INCLUDE_DIR NAMES ${header}
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cavs_roots}
    PATH_SUFFIXES include targets/x86_64-linux/include)
  if(CAVS_${NAME}_LIBRARY AND CAVS_${NAME}_INCLUDE_DIR)
    _cavs_import_library(${target} "${CAVS_${NAME}_LIBRARY}" "${CAVS_${NAME}_INCLUDE_DIR}")
    set(CAVS_${NAME}_FOUND TRUE PARENT_SCOPE)
    set(CAVS_${NAME}_WHY "found at ${CAVS_${NAME}_LIBRARY}" PARENT_SCOPE)
  else()
    set(CAVS_${NAME}_FOUND FALSE PARENT_SCOPE)
    set(CAVS_${NAME}_WHY "not found (lib${libname} or ${header} missing under ${_cavs_roots})"
        PARENT_SCOPE)
  endif()
endmacro()

function(cavs_find_cudnn)
  _cavs_find_cuda_library(CUDNN cudnn cudnn.h cavs_deps::cudnn)
endfunction()

function(cavs_find_nccl)
  _cavs_find_cuda_library(NCCL nccl nccl.h cavs_deps::nccl)
endfunction()
