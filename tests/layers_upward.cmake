# Negative control of cmake/check_layers.cmake: a tree where core/ includes cli/ must fail
# the check, naming the include; the same tree without it must pass.
#   cmake -DSRC=<source dir> -DWORK=<scratch dir> -P tests/layers_upward.cmake
file(REMOVE_RECURSE ${WORK})
file(WRITE ${WORK}/core/a.hpp "#pragma once\n#include \"core/b.hpp\"\n")
file(WRITE ${WORK}/core/b.hpp "#pragma once\n")
file(WRITE ${WORK}/cli/c.cpp "#include \"core/a.hpp\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${WORK} -P ${SRC}/cmake/check_layers.cmake RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a tree with only downward includes failed the check:\n${err}")
endif()
file(WRITE ${WORK}/core/b.hpp "#pragma once\n#include \"cli/c.hpp\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${WORK} -P ${SRC}/cmake/check_layers.cmake RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "core/b.hpp: #include \"cli/c.hpp\" \\(core is below cli\\)")
  message(FATAL_ERROR "core including cli passed the check (rc ${rc}):\n${err}")
endif()
message(STATUS "check_layers flags core/b.hpp including cli/c.hpp")
