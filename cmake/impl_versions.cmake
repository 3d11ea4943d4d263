# Impl versions (README: Results, impl_version): per impl key, a hash of every source-tree file
# that the key's translation units depend on, as the compiler reported it when it compiled
# them, salted with the compiler ids/versions and the flags.
#
# MODE=build (a custom command, after the impl objects compile):
#   cmake -DMODE=build -DSRC=<source dir> -DBIN=<build dir> -DNINJA=<ninja> -DOBJS=<objects>
#         -DSALT=<compilers and flags> -DOUT=<kv_impl_versions.cpp> -P cmake/impl_versions.cmake
#   OBJS are the impl objects (kv_ops', and kv_kernels' in CUDA builds). Their dependencies
#   come from ninja's deps log (the compiler's depfiles, which ninja keeps there), read from a
#   copy so the ninja running this build is never disturbed. Keys:
#     host           every object from ops/ (the host impls and their op bindings)
#     cuda_<op>      the objects from kernels/<op>/, plus any other kernels/ object that
#                    implements a header they include (kernels/cuda_row_impl.hpp brings
#                    kernels/cuda_row_impl.cpp, kernels/cross_entropy/cuda_plan.hpp brings
#                    cuda_plan.cpp into cuda_flce), to a fixed point
#   Files outside the source tree (system, CUDA, Eigen headers) and in the build tree
#   (generated headers) are not hashed. Writes OUT (the table, with each key's files) and
#   beside it kv_impl_versions.txt (the manifest MODE=hash reads), each only when it changes.
#
# MODE=hash (the tests; no build tree needed):
#   cmake -DMODE=hash -DMANIFEST=<file> -DROOT=<dir> -DOUT=<file> -P cmake/impl_versions.cmake
#   MANIFEST: a line `salt <text>` (the last one counts) and lines `<key> <file relative to
#   ROOT>`. Writes `<key> <version>` lines to OUT, hashing the files under ROOT exactly as
#   MODE=build does.
cmake_minimum_required(VERSION 3.25)

# The version of each key in `keys`, where kv_files_<key> lists its files relative to
# `root`: the first 16 hex digits of SHA-256 over the salt and, per file in sorted order,
# its path and the SHA-256 of its bytes. Sets kv_version_<key> in the caller.
function(kv_hash_keys root salt keys)
  foreach(key ${keys})
    set(text "kverify impl version 1\n${salt}\n")
    set(files ${kv_files_${key}})
    list(SORT files)
    foreach(f ${files})
      string(MD5 id "${f}")  # a variable name for any path, no collisions
      if(NOT DEFINED kv_sha_${id})
        if(NOT EXISTS "${root}/${f}")
          message(FATAL_ERROR "impl versions: ${root}/${f} (a dependency of ${key}) does not exist")
        endif()
        file(SHA256 "${root}/${f}" kv_sha_${id})
      endif()
      string(APPEND text "${f} ${kv_sha_${id}}\n")
    endforeach()
    string(SHA256 h "${text}")
    string(SUBSTRING "${h}" 0 16 h)
    set(kv_version_${key} ${h} PARENT_SCOPE)
  endforeach()
endfunction()

function(kv_write_if_changed path text)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${text}")
endfunction()

# A C++ string literal.
function(kv_cxx_string out s)
  string(REPLACE "\\" "\\\\" s "${s}")
  string(REPLACE "\"" "\\\"" s "${s}")
  set(${out} "\"${s}\"" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "hash")
  file(STRINGS "${MANIFEST}" lines)
  set(keys "")
  set(salt "")
  foreach(line ${lines})
    if(line MATCHES "^salt (.*)$")
      set(salt "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^([A-Za-z0-9_]+) (.+)$")
      list(APPEND keys ${CMAKE_MATCH_1})
      list(APPEND kv_files_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    elseif(NOT line STREQUAL "")
      message(FATAL_ERROR "impl versions: ${MANIFEST}: cannot read line '${line}'")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES keys)
  kv_hash_keys("${ROOT}" "${salt}" "${keys}")
  set(text "")
  foreach(key ${keys})
    string(APPEND text "${key} ${kv_version_${key}}\n")
  endforeach()
  file(WRITE "${OUT}" "${text}")
  return()
endif()

if(NOT MODE STREQUAL "build")
  message(FATAL_ERROR "impl versions: MODE must be build or hash")
endif()

# Each object's source, relative to SRC (CMake names an object <target>.dir/<source>.o).
set(keys "")
set(targets "")
foreach(obj ${OBJS})
  cmake_path(NORMAL_PATH obj)  # $<TARGET_OBJECTS> gives <target>.dir/./<source>.o
  if(NOT obj MATCHES "/CMakeFiles/[^/]+\\.dir/(.+)\\.o$")
    message(FATAL_ERROR "impl versions: cannot tell the source of object ${obj}")
  endif()
  set(src "${CMAKE_MATCH_1}")
  if(NOT EXISTS "${SRC}/${src}")
    message(FATAL_ERROR "impl versions: object ${obj}: no source ${SRC}/${src}")
  endif()
  string(MD5 id "${src}")
  file(RELATIVE_PATH target "${BIN}" "${obj}")
  set(kv_target_${id} "${target}")
  set(kv_source_of_${target} "${src}")
  list(APPEND targets "${target}")
  if(src MATCHES "^ops/")
    set(key host)
  elseif(src MATCHES "^kernels/([^/]+)/[^/]+$")
    set(key "cuda_${CMAKE_MATCH_1}")
  elseif(src MATCHES "^kernels/[^/]+$")
    set(key "")  # shared by the CUDA impls: joins those that include its header
  else()
    message(FATAL_ERROR "impl versions: ${src} belongs to no impl key (ops/ or kernels/)")
  endif()
  if(NOT key STREQUAL "")
    list(APPEND keys ${key})
    list(APPEND kv_units_${key} "${src}")
  endif()
endforeach()
list(REMOVE_DUPLICATES keys)
list(SORT keys)

# What the compiler said each object depends on, from a copy of ninja's deps log (the
# ninja running this build appends to the original while other objects finish).
set(snap "${BIN}/CMakeFiles/kv_impl_versions")
file(MAKE_DIRECTORY "${snap}")
if(NOT EXISTS "${BIN}/.ninja_deps")
  message(FATAL_ERROR "impl versions: no ${BIN}/.ninja_deps (the impl versions need the Ninja generator)")
endif()
file(COPY_FILE "${BIN}/.ninja_deps" "${snap}/.ninja_deps")
file(WRITE "${snap}/build.ninja" "# Empty: only for `ninja -t deps` over the copy of the deps log beside it.\n")
execute_process(COMMAND "${NINJA}" -C "${snap}" -n -t deps ${targets}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "impl versions: ${NINJA} -t deps failed (${rc}): ${err}")
endif()
if(out MATCHES "\\[")
  message(FATAL_ERROR "impl versions: a dependency path holds '[', which this script cannot list")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(target "")
foreach(line ${lines})
  if(line MATCHES "^([^ ].*): #deps [0-9]+")
    set(target "${CMAKE_MATCH_1}")
    if(NOT DEFINED kv_source_of_${target})
      message(FATAL_ERROR "impl versions: ninja listed deps of an object not asked for: ${target}")
    endif()
    set(kv_seen_${target} 1)
    set(kv_deps_${target} "")
  elseif(line MATCHES "^([^ ].*): deps not found")
    message(FATAL_ERROR "impl versions: ninja has no dependencies recorded for ${CMAKE_MATCH_1}")
  elseif(line MATCHES "^    (.+)$")
    set(dep "${CMAKE_MATCH_1}")
    if(NOT IS_ABSOLUTE "${dep}")
      set(dep "${BIN}/${dep}")
    else()
      string(FIND "${dep}" "${SRC}/" at)
      if(NOT at EQUAL 0)
        continue()  # outside the source tree (most of them: system headers)
      endif()
    endif()
    cmake_path(NORMAL_PATH dep)
    cmake_path(IS_PREFIX BIN "${dep}" NORMALIZE in_bin)
    cmake_path(IS_PREFIX SRC "${dep}" NORMALIZE in_src)
    if(in_src AND NOT in_bin)
      file(RELATIVE_PATH rel "${SRC}" "${dep}")
      list(APPEND kv_deps_${target} "${rel}")
    endif()
  endif()
endforeach()
foreach(target ${targets})
  if(NOT kv_seen_${target})
    message(FATAL_ERROR "impl versions: ninja listed no dependencies for ${target}")
  endif()
  # A unit's own source is its first dependency: missing, the compiler named the source
  # tree by another path (a symlink?) and nothing of it would be hashed.
  if(NOT "${kv_source_of_${target}}" IN_LIST kv_deps_${target})
    message(FATAL_ERROR "impl versions: the dependencies of ${target} do not name ${SRC}/${kv_source_of_${target}}")
  endif()
endforeach()

# Each key's files: its units' dependencies, and those of the kernels/ objects implementing
# a header it includes (same path but the extension), until no more join.
foreach(key ${keys})
  set(units ${kv_units_${key}})
  set(files "")
  set(todo ${units})
  while(NOT todo STREQUAL "")
    list(POP_FRONT todo unit)
    string(MD5 id "${unit}")
    list(APPEND files ${kv_deps_${kv_target_${id}}})
    list(REMOVE_DUPLICATES files)
    if(NOT key MATCHES "^cuda_")
      continue()
    endif()
    foreach(f ${files})
      if(NOT f MATCHES "^kernels/.*\\.(hpp|cuh|h)$")
        continue()
      endif()
      string(REGEX REPLACE "\\.[^./]+$" "" stem "${f}")
      foreach(ext cpp cu)
        set(impl_src "${stem}.${ext}")
        string(MD5 iid "${impl_src}")
        if(DEFINED kv_target_${iid} AND NOT "${impl_src}" IN_LIST units)
          list(APPEND units "${impl_src}")
          list(APPEND todo "${impl_src}")
        endif()
      endforeach()
    endforeach()
  endwhile()
  list(SORT files)
  set(kv_files_${key} ${files})
  list(SORT units)
  set(kv_units_${key} ${units})
endforeach()

kv_hash_keys("${SRC}" "${SALT}" "${keys}")

# The manifest (MODE=hash reads it) and the table.
string(REGEX REPLACE "\\.cpp$" ".txt" manifest "${OUT}")
set(mtext "salt ${SALT}\n")
kv_cxx_string(salt_lit "${SALT}")
set(arrays "")
set(rows "")
foreach(key ${keys})
  set(lits "")
  foreach(f ${kv_files_${key}})
    string(APPEND mtext "${key} ${f}\n")
    kv_cxx_string(lit "${f}")
    string(APPEND lits "    ${lit},\n")
  endforeach()
  set(ulits "")
  foreach(u ${kv_units_${key}})
    kv_cxx_string(lit "${u}")
    string(APPEND ulits "    ${lit},\n")
  endforeach()
  string(APPEND arrays "const char* const kFiles_${key}[] = {\n${lits}};\nconst char* const kUnits_${key}[] = {\n${ulits}};\n")
  string(APPEND rows "    {\"${key}\", \"${kv_version_${key}}\", kUnits_${key}, kFiles_${key}},\n")
endforeach()
if(rows STREQUAL "")
  message(FATAL_ERROR "impl versions: no impl objects given")
endif()
set(text "// Generated by cmake/impl_versions.cmake from the impl objects' dependencies: do not edit.
#include \"core/impl_version.hpp\"

namespace kv {

namespace {

${arrays}
const ImplVersionEntry kTable[] = {
${rows}};

}  // namespace

std::span<const ImplVersionEntry> impl_version_table() { return kTable; }

const char* impl_version_salt() { return ${salt_lit}; }

}  // namespace kv
")
kv_write_if_changed("${manifest}" "${mtext}")
kv_write_if_changed("${OUT}" "${text}")
