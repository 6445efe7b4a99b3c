# cavsInstall.cmake: install rules that let another project find_package(cavs) and link cavs::*.
#
#   cavs_install_library(<target>)
#     Installs a library target into the export set `cavsTargets` under the namespace `cavs::`,
#     with the export name stripped of its `cavs_` prefix (cavs_scheduler -> cavs::scheduler).
#     Also: gives the target the include directories `$<BUILD_INTERFACE:<repo root>>` /
#     `$<INSTALL_INTERFACE:include/cavs>` if it lacks them, links it to cavs_config (so every
#     library sees the same CAVS_WITH_* definitions), and installs the headers (*.h, *.cuh) of the
#     top-level folder it lives in under include/cavs/<folder>/. Safe to call more than once.
#
#   cavs_install_all(<folder>...)
#     Called once by the root after all add_subdirectory(): installs every library named cavs_*
#     defined in the given folders (recursively), plus any in-tree library they link, and every
#     executable named cavs-* (e.g. cavs-train) into bin/. Folder owners need do nothing; a
#     library only its folder's binaries and tests use, with dependencies a consumer of
#     find_package(cavs) should not need, opts out with the target property CAVS_EXPORT OFF.
#
#   cavs_install_package()
#     Writes and installs cavsConfig.cmake, its version file, cavsTargets.cmake and cavsDeps.cmake.
#     cavsConfig.cmake also sets cavs_DATA_DIR, the installed bundled data (<datadir>/cavs/data).
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CAVS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/cavs")
set(CAVS_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/cavs")
# The bundled datasets (data/synthetic, installed with cavs-train); cavsConfig.cmake sets
# cavs_DATA_DIR to it.
set(CAVS_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/cavs/data")
set(_CAVS_LIBRARY_TYPES STATIC_LIBRARY SHARED_LIBRARY INTERFACE_LIBRARY OBJECT_LIBRARY)

# Installs the headers of the top-level folder holding `source_dir`, once per folder.
function(_cavs_install_headers source_dir)
  file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${source_dir}")
  if(rel STREQUAL "" OR rel MATCHES "^\\.\\.")
    return()  # a root-level target (cavs_config) or one from outside the tree: no headers
  endif()
  string(REGEX REPLACE "/.*" "" folder "${rel}")
  get_property(done GLOBAL PROPERTY CAVS_INSTALLED_HEADER_FOLDERS)
  if(folder IN_LIST done)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY CAVS_INSTALLED_HEADER_FOLDERS "${folder}")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/${folder}/"
    DESTINATION "${CAVS_INSTALL_INCLUDEDIR}/${folder}"
    FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endfunction()

function(cavs_install_library target)
  get_target_property(aliased ${target} ALIASED_TARGET)
  if(aliased)
    set(target ${aliased})
  endif()
  get_property(done GLOBAL PROPERTY CAVS_INSTALLED_TARGETS)
  if(target IN_LIST done)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type IN_LIST _CAVS_LIBRARY_TYPES)
    message(FATAL_ERROR "cavs_install_library(${target}): not a library (${type})")
  endif()
  set_property(GLOBAL APPEND PROPERTY CAVS_INSTALLED_TARGETS ${target})

  string(REGEX REPLACE "^cavs_" "" export_name "${target}")
  set_target_properties(${target} PROPERTIES EXPORT_NAME "${export_name}")

  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  else()
    set(scope PUBLIC)
  endif()
  get_target_property(includes ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT includes MATCHES "INSTALL_INTERFACE:")
    target_include_directories(${target} ${scope}
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:${CAVS_INSTALL_INCLUDEDIR}>)
  endif()
  # Set the properties directly rather than through target_link_libraries, which would clash
  # with a folder that used the plain (keyword-less) signature for this target.
  if(NOT target STREQUAL "cavs_config")
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_LIBRARIES cavs_config)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      set_property(TARGET ${target} APPEND PROPERTY LINK_LIBRARIES cavs_config)
    endif()
  endif()

  install(TARGETS ${target} EXPORT cavsTargets
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
    OBJECTS DESTINATION "${CMAKE_INSTALL_LIBDIR}/cavs-objects")
  get_target_property(source_dir ${target} SOURCE_DIR)
  _cavs_install_headers("${source_dir}")
endfunction()

# All build-system targets of `dir` and its subdirectories.
function(_cavs_targets_under dir out_var)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _cavs_targets_under("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out_var} "${targets}" PARENT_SCOPE)
endfunction()

# In-tree (non-imported) libraries that `target` links, directly or for its consumers.
function(_cavs_in_tree_deps target out_var)
  get_target_property(type ${target} TYPE)
  get_target_property(items ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(private_items ${target} LINK_LIBRARIES)
    list(APPEND items ${private_items})
  endif()
  set(deps "")
  foreach(item IN LISTS items)
    # Unwrap the common $<LINK_ONLY:x> and $<BUILD_INTERFACE:x>; skip other expressions.
    string(REGEX REPLACE "^\\$<(LINK_ONLY|BUILD_INTERFACE):(.*)>$" "\\2" item "${item}")
    if(item MATCHES "^\\$<|^::@" OR NOT TARGET "${item}")
      continue()
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    get_target_property(imported ${item} IMPORTED)
    get_target_property(item_type ${item} TYPE)
    if(NOT imported AND item_type IN_LIST _CAVS_LIBRARY_TYPES)
      list(APPEND deps ${item})
    endif()
  endforeach()
  set(${out_var} "${deps}" PARENT_SCOPE)
endfunction()

function(cavs_install_all)
  set(queue "")
  set(executables "")
  foreach(folder IN LISTS ARGN)
    if(NOT IS_DIRECTORY "${PROJECT_SOURCE_DIR}/${folder}"
       OR NOT EXISTS "${PROJECT_SOURCE_DIR}/${folder}/CMakeLists.txt")
      continue()
    endif()
    _cavs_targets_under("${PROJECT_SOURCE_DIR}/${folder}" targets)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      get_target_property(export ${target} CAVS_EXPORT)
      if(type IN_LIST _CAVS_LIBRARY_TYPES AND target MATCHES "^cavs_" AND
         (export OR export STREQUAL "export-NOTFOUND"))
        list(APPEND queue ${target})
      elseif(type STREQUAL "EXECUTABLE" AND target MATCHES "^cavs-")
        list(APPEND executables ${target})
      endif()
    endforeach()
  endforeach()
  # Close over in-tree dependencies: an exported target may only link exported targets.
  set(selected "")
  while(queue)
    list(POP_FRONT queue target)
    if(target IN_LIST selected)
      continue()
    endif()
    list(APPEND selected ${target})
    _cavs_in_tree_deps(${target} deps)
    list(APPEND queue ${deps})
  endwhile()
  foreach(target IN LISTS selected)
    cavs_install_library(${target})
  endforeach()
  foreach(exe IN LISTS executables)
    install(TARGETS ${exe} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
  endforeach()
  get_property(installed GLOBAL PROPERTY CAVS_INSTALLED_TARGETS)
  set(CAVS_INSTALLED_TARGETS "${installed}" PARENT_SCOPE)
  set(CAVS_INSTALLED_EXECUTABLES "${executables}" PARENT_SCOPE)
endfunction()

function(cavs_install_package)
  install(EXPORT cavsTargets
    NAMESPACE cavs::
    FILE cavsTargets.cmake
    DESTINATION "${CAVS_INSTALL_CMAKEDIR}")
  configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/cavsConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/cavsConfig.cmake"
    INSTALL_DESTINATION "${CAVS_INSTALL_CMAKEDIR}"
    PATH_VARS CAVS_INSTALL_DATADIR)
  write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/cavsConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMinorVersion)
  install(FILES
    "${PROJECT_BINARY_DIR}/cavsConfig.cmake"
    "${PROJECT_BINARY_DIR}/cavsConfigVersion.cmake"
    "${PROJECT_SOURCE_DIR}/cmake/cavsDeps.cmake"
    DESTINATION "${CAVS_INSTALL_CMAKEDIR}")
endfunction()
