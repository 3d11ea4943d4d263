# Fails when an object of a wide-ISA copy of the dense products (reference/gemm_isa.cpp)
# defines a global or weak symbol that another object could also define: the linker would
# keep one definition, possibly AVX-512 code on the baseline path. Allowed: the copy's entry
# point, anything mangled with its own Eigen namespace, and the personality reference.
# Usage: cmake -DNM=nm -DOBJS="a.o;b.o" -P check_gemm_symbols.cmake
foreach(obj ${OBJS})
  execute_process(COMMAND ${NM} -g --defined-only ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(n 0)
  foreach(line ${lines})
    if(line STREQUAL "")
      continue()
    endif()
    string(REGEX REPLACE "^[0-9a-f]* *[A-Za-z] " "" sym "${line}")
    if(sym MATCHES "^kv_gemm_table_(avx2|avx512)$" OR sym MATCHES "Eigen_(avx2|avx512)"
       OR sym STREQUAL "DW.ref.__gxx_personality_v0")
      math(EXPR n "${n} + 1")
    else()
      message(FATAL_ERROR "${obj} defines a symbol it may share with other objects: ${sym}")
    endif()
  endforeach()
  if(n LESS 2)
    message(FATAL_ERROR "${obj}: expected the entry point and Eigen's products, found ${n} symbols")
  endif()
  message(STATUS "${obj}: ${n} global symbols, all its own")
endforeach()
