# Embeds a text file into a header as a raw string literal: -DIN=... -DOUT=... -DNAME=...
file(READ ${IN} content)
set(text "// Generated from ${IN}.\n#pragma once\ninline constexpr const char* ${NAME} = R\"kvembed(${content})kvembed\";\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
